"""Words over phoneme characters: one to one, by re-phonemising, by clause, or one span, never wrong."""

from __future__ import annotations

from streamvoice.engine.alignment import (
    WordSpan,
    WordTime,
    phoneme_groups,
    shift,
    split_spans,
    text_words,
    voiced_range,
    word_spans,
)
from streamvoice.engine.kokoro import KokoroEngine


def no_phonemizer(word: str) -> str:
    raise AssertionError("a one-to-one match needs no re-phonemising")


def test_one_group_per_word() -> None:
    spans = word_spans("Hello there, friend.", "həlˈoʊ ðˈɛɹ, fɹˈɛnd.", no_phonemizer)
    assert [s.word for s in spans] == ["Hello", "there,", "friend."]
    assert spans[1] == WordSpan("there,", 7, 11)  # the comma is not part of the word's sound


def test_words_with_several_groups_are_counted_by_rephonemising() -> None:
    phonemes = {"It": "ɪt", "costs": "kˈɔsts", "$3.": "dˈɑːlɚz θɹˈiː"}
    spans = word_spans("It costs $3.", "ɪt kˈɔsts dˈɑːlɚz θɹˈiː.", phonemes.__getitem__)
    assert [s.word for s in spans] == ["It", "costs", "$3."]
    assert spans[2].first == "ɪt kˈɔsts ".__len__() and spans[2].last == len("ɪt kˈɔsts dˈɑːlɚz θɹˈiː")


def test_disagreement_falls_back_to_clauses_then_one_span() -> None:
    # espeak joined two words in the second clause: that clause becomes one span, the first stays exact
    spans = word_spans("Yes, of the two.", "jˈɛs, ʌvðə tˈuː.", lambda w: "x")
    assert spans[0].word == "Yes," and spans[-1].word == "of the two."
    # punctuation that does not line up either: one span for the piece
    spans = word_spans("a b c", "x y", lambda w: "z")
    assert spans == (WordSpan("a b c", 0, 3),)


def test_helpers() -> None:
    assert text_words("— Hello , world!") == ["Hello", "world!"]
    assert phoneme_groups("ab, cd.") == [(0, 2, True), (4, 6, True)]
    assert voiced_range(" .ab cd. ") == (2, 7)
    assert split_spans((WordSpan("a", 0, 2), WordSpan("b", 3, 5)), 3, 5) == (WordSpan("b", 0, 2),)
    assert shift([WordTime("a", 1.0, 2.0)], 10) == [WordTime("a", 11.0, 12.0)]


def test_real_phonemes_map_numbers_and_abbreviations(engine: KokoroEngine) -> None:
    piece = engine.planner.plan("It costs $3.50 on 12/3/2024, says Dr. Smith.", "en-us")[0]
    assert [s.word for s in piece.words] == [
        "It",
        "costs",
        "$3.50",
        "on",
        "12/3/2024,",
        "says",
        "Dr.",
        "Smith.",
    ]
    assert all(a.last <= b.first for a, b in zip(piece.words, piece.words[1:], strict=False))
