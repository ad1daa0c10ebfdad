"""Text normalisation: what each category becomes (the table in docs/languages.md), that the caller's words
survive as the tokens' originals, and, with the real model and Whisper, that the words are heard."""

from __future__ import annotations

from typing import Any

import pytest

from streamvoice.bench.wer import words
from streamvoice.engine import KokoroEngine
from streamvoice.engine.alignment import WordTime
from streamvoice.text.normalize import normalize, say, spoken_text

CATEGORIES: dict[str, list[tuple[str, str]]] = {
    "money": [
        ("It costs $12.50.", "It costs twelve dollars fifty cents."),
        ("Only €3.99 today", "Only three euros ninety-nine cents today"),
        ("£5 each", "five pounds each"),
        ("$0.99", "ninety-nine cents"),
        ("$1.2M raised", "one point two million dollars raised"),
        ("$5-10 each", "five to ten dollars each"),
        ("$2 billion", "two billion dollars"),
    ],
    "times": [
        ("at 3pm", "at three p m"),
        ("at 9:05 a.m. sharp", "at nine oh five a m sharp"),
        ("by 15:45", "by fifteen forty-five"),
        ("at 7:30 PM", "at seven thirty p m"),
    ],
    "dates": [
        ("on Dec. 5th", "on December fifth"),
        ("on March 3, 2025", "on March third twenty twenty-five"),
        ("on 2026-12-01", "on December first twenty twenty-six"),
        ("on 12/25/2026", "on December twenty-fifth twenty twenty-six"),
        ("the 4th of July", "the fourth of July"),
    ],
    "phones": [
        ("call (555) 123-4567", "call five five five, one two three, four five six seven"),
        ("call 555-123-4567", "call five five five, one two three, four five six seven"),
        ("call +1 555 123 4567", "call one, five five five, one two three, four five six seven"),
    ],
    "urls and emails": [
        ("write to support@example.com", "write to support at example dot com"),
        ("see https://docs.example.com/setup.", "see docs dot example dot com slash setup."),
        ("visit www.example.org today", "visit w w w dot example dot org today"),
        ("go to example.com/help", "go to example dot com slash help"),
    ],
    "units and temperatures": [
        ("it is 72°F", "it is seventy-two degrees Fahrenheit"),
        ("or -5°C", "or minus five degrees Celsius"),
        ("a 5 km run", "a five kilometers run"),
        ("10kg of rice", "ten kilograms of rice"),
        ("24 hrs a day", "twenty-four hours a day"),
        ("1 min", "one minute"),
        ("100 MB left", "one hundred megabytes left"),
        ("at 3 mph", "at three miles per hour"),
    ],
    "percentages": [("50% off", "fifty percent off"), ("3.5 % more", "three point five percent more")],
    "ordinals": [("the 1st, 2nd, 3rd and 21st", "the first, second, third and twenty-first")],
    "years and decades": [
        ("in 2026", "in twenty twenty-six"),
        ("in 1905", "in nineteen oh five"),
        ("in 2005", "in two thousand five"),
        ("the 1990s", "the nineteen nineties"),
        ("the '80s", "the eighties"),
        ("the 1900s", "the nineteen hundreds"),
        ("the 2000s", "the two thousands"),
    ],
    "ranges": [("4-6 hours", "four to six hours"), ("pages 10–20", "pages ten to twenty")],
    "versions": [
        ("v2.1.3 is out", "version two point one point three is out"),
        ("3.14", "three point one four"),
    ],
    "abbreviations and titles": [
        ("Dr. Smith", "Doctor Smith"),
        ("Mr. and Mrs. Jones", "Mister and Missus Jones"),
        ("on Main St. near St. Paul", "on Main Street near Saint Paul"),
        ("fruit, e.g. apples, etc.", "fruit, for example apples, et cetera"),
    ],
    "numbers": [("1,234 people", "one thousand two hundred thirty-four people"), ("42", "forty-two")],
    "emoji and symbols": [
        ("Great job! 👍🎉", "Great job!"),
        ("R&D", "R and D"),
        ("2+2=4", "two plus two equals four"),
        ("#1 pick", "number one pick"),
        ("and/or", "and or"),
        ("**bold** and `code`", "bold and code"),
    ],
}


@pytest.mark.parametrize("category", list(CATEGORIES))
def test_each_category_is_read_as_a_person_would(category: str) -> None:
    for written, spoken in CATEGORIES[category]:
        assert say(written) == spoken, written


def test_the_callers_words_survive_as_originals() -> None:
    text = "Pay $12.50 by Dec. 5th, call (555) 123-4567."
    tokens = normalize(text)
    assert [t.original for t in tokens if any(c.isalnum() for c in t.original)] == [
        "Pay",
        "$12.50",
        "by",
        "Dec. 5th",
        "call",
        "(555) 123-4567",
    ]
    assert spoken_text(tokens).startswith("Pay twelve dollars fifty cents by December fifth,")


def test_other_languages_get_the_neutral_rules_and_their_own_numbers() -> None:
    spoken = say("Cuesta 12 euros 👍 hoy, escribe a info@example.com", "es")
    assert spoken == "Cuesta doce euros hoy, escribe a info arroba example punto com"  # tests/test_latin.py


# What language models write, heard through the real model (the "3 of 12 read right"): the
# benchmark's own sentences (bench.languages reports the share; this holds it).
@pytest.mark.slow
def test_llm_style_sentences_are_heard_as_meant(engine: KokoroEngine, transcriber: Any) -> None:
    expected_total = heard_total = 0
    from streamvoice.bench.languages import LLM_SENTENCES

    clips = [engine.synthesize(sentence, "af_heart") for sentence in LLM_SENTENCES]
    for sentence, heard in zip(
        LLM_SENTENCES, transcriber.transcribe_parts(clips, language="en"), strict=True
    ):
        expected = words(say(sentence))
        got = words(say(heard))  # both sides normalised: Whisper writes "$12.50" for what it heard
        remaining = list(got)
        hits = 0
        for word in expected:
            if word in remaining:
                remaining.remove(word)
                hits += 1
        expected_total += len(expected)
        heard_total += hits
    assert heard_total / expected_total >= 0.9, heard_total / expected_total


def test_word_times_name_the_callers_words(engine: KokoroEngine) -> None:
    (piece,) = engine.planner.plan("It costs $12.50 at 3pm.", "en-us")
    said: list[list[WordTime]] = []
    list(
        engine.stream_piece(piece, engine.parse_voice("af_heart"), 1.0, windowed=False, on_words=said.append)
    )
    (times,) = said
    named = [t.word for t in times]
    assert named == ["It", "costs", "$12.50", "at", "3pm."] or named == ["It", "costs", "$12.50", "at", "3pm"]
    money = times[2]
    assert money.end_ms - money.start_ms > 800  # "twelve dollars fifty cents", not one short word


@pytest.mark.parametrize(
    ("lang", "said"),
    [
        ("en-us", "info at example dot com"),
        ("es", "info arroba example punto com"),
        ("fr-fr", "info arobase example point com"),
        ("it", "info chiocciola example punto com"),
        ("pt-br", "info arroba example ponto com"),
        ("ja", "info アット example ドット com"),
        ("cmn", "info 艾特 example 点 com"),
        ("hi", "info एट example डॉट com"),
    ],
)
def test_an_address_is_said_in_the_voices_language_not_in_english(lang: str, said: str) -> None:
    """What every language shares is the address's shape; the words are each language's own (a Spanish
    voice once read "info at example dot com")."""
    assert say("info@example.com", lang) == said
