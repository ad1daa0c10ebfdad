"""What every phonemiser is handed: long joined runs read part by part, long numbers digit by digit,
ordinary text untouched; and a phonemiser that fails on a text reads what it can of it."""

from __future__ import annotations

import re

import pytest

from streamvoice.engine import KokoroEngine
from streamvoice.engine.g2p import G2P, G2PError
from streamvoice.engine.g2p.bounds import MAX_RUN_PARTS, bounded, split_run
from streamvoice.engine.voices import SUPPORTED_LANGS


@pytest.mark.parametrize(
    "text",
    [
        "state-of-the-art",
        "555-123-4567",
        "v2.1.3",
        "support@example.com",
        "我用iPhone打电话",
        "今天是2024年3月5日，温度20度。",
    ],
)
def test_ordinary_text_is_untouched(text: str) -> None:
    assert bounded(text, "en-us") == text


def test_a_long_joined_run_is_read_part_by_part_with_its_sentence_punctuation() -> None:
    chain = "-".join(str(i % 10) for i in range(20)) + "."
    assert split_run(chain) == " ".join(str(i % 10) for i in range(20)) + "."
    assert split_run("a/b/c/d/e/f/g/h/i") == "a b c d e f g h i"
    assert split_run("-".join(["x"] * MAX_RUN_PARTS)) == "-".join(
        ["x"] * MAX_RUN_PARTS
    )  # at the bound: as is


def test_long_numbers_are_read_digit_by_digit_in_each_languages_limit() -> None:
    assert bounded("電話は09012345678です", "ja") == "電話は0 9 0 1 2 3 4 5 6 7 8です"  # leading zero kept
    assert bounded("123456789", "ja") == "123456789"
    assert bounded("1234567890123456", "es") == " ".join("1234567890123456")
    assert bounded("123456789012345", "es") == "123456789012345"


def test_no_backend_is_handed_a_run_of_more_parts_than_the_bound() -> None:
    """What made misaki superlinear (80 hyphen parts 1.9 s, "a1" x 150 7 s) never reaches a backend."""
    g2p = G2P(SUPPORTED_LANGS)
    seen: list[str] = []
    english = g2p._backend("en-us")
    g2p._backends["en-us"] = lambda text: seen.append(text) or english(text)
    for text in ("-".join(str(i % 10) for i in range(80)), "a1" * 150, "/".join(["ab"] * 80)):
        assert g2p.phonemize(text, "en-us")
    assert seen and all(
        len(re.findall(r"[^\W\d_]+|\d+", run)) <= MAX_RUN_PARTS for t in seen for run in t.split()
    )


def test_a_phonemiser_that_fails_reads_what_it_can() -> None:
    g2p = G2P(SUPPORTED_LANGS)
    assert g2p.phonemize("今天龶很好", "cmn")  # pypinyin fails on the rare character alone
    with pytest.raises(G2PError):
        g2p.phonemize("龶", "cmn")


# --- 3. rotating languages ------------------------------------------------------------------------------


def test_one_phonemizer_backend_per_language(engine: KokoroEngine) -> None:
    from streamvoice.engine.voices import SUPPORTED_LANGS

    for _ in range(3):
        for lang in SUPPORTED_LANGS:
            engine.planner.phonemizer.phonemize("Hello, one two three.", lang)
    assert engine.planner.phonemizer.backends == len(SUPPORTED_LANGS)
    with pytest.raises(ValueError, match="unsupported lang"):
        engine.planner.phonemizer.phonemize("Hello.", "xx")
