"""``text.languages.japanese``: amounts in kanji numerals, counters with their sound changes (いっぷん, ふたり), clock
times, dates and yen, as a Japanese speaker reads them."""

from __future__ import annotations

import pytest

from streamvoice.text.languages import japanese
from streamvoice.text.normalize import say

READINGS = [
    ("合計は12,400円です。", "合計は一万二千四百円です。"),
    ("4円です。", "よえんです。"),
    ("9時半に。", "くじはんに。"),
    ("7月24日まで。", "しちがつにじゅうよっかまで。"),
    ("2026/1/1に。", "二千二十六年いちがつついたちに。"),
    ("10:01発", "じゅうじいっぷん発"),
    ("1日3回、2人で3つ。", "いちにちさんかい、ふたりでみっつ。"),
    ("6ヶ月で20人、30分。", "ろっかげつでにじゅうにん、さんじゅっぷん。"),
    ("3階の8本と1杯", "さんがいのはっぽんといっぱい"),
]


@pytest.mark.parametrize(("written", "said"), READINGS)
def test_values_are_read_as_a_japanese_speaker_says_them(written: str, said: str) -> None:
    assert say(written, "ja") == said


def test_numbers_are_kanji_and_counters_change_their_sound() -> None:
    assert japanese.kanji(12_400) == "一万二千四百"
    assert japanese.cardinal(12_400) == "いちまんにせんよんひゃく"
    assert [japanese.minutes(n) for n in (1, 3, 30)] == ["いっぷん", "さんぷん", "さんじゅっぷん"]
    assert japanese.counted(2, "人") == "ふたり" and japanese.counted(3, "回") == "さんかい"
    assert japanese.digits("407") == "よんゼロなな"  # a phone number or an id: digit by digit
