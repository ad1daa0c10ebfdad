"""``text.languages.mandarin``: money in 元/角/分, 点 and 分 for clock times, years digit by digit, 百分之 for
percentages, as a Mandarin speaker reads them."""

from __future__ import annotations

import pytest

from streamvoice.text.languages import mandarin
from streamvoice.text.normalize import say

READINGS = [
    ("一共¥2.05。", "一共两元零五分。"),
    ("一共12元。", "一共十二元。"),
    ("2点见。", "两点见。"),
    ("9:05出发。", "九点零五分出发。"),
    ("2025-12-31到期。", "二零二五年十二月三十一日到期。"),
    ("气温-3°C。", "气温零下三摄氏度。"),
    ("3.5%的利率", "百分之三点五的利率"),
    ("涨了3-5%", "涨了百分之三到五"),
    ("客服电话400-820-8820。", "客服电话四零零，八二零，八八二零。"),  # a service number, not a range
    ("拨打800 810 8888。", "拨打八零零，八幺零，八八八八。"),
    ("1-2天", "一到二天"),  # a range is still a range
]


@pytest.mark.parametrize(("written", "said"), READINGS)
def test_values_are_read_as_a_mandarin_speaker_says_them(written: str, said: str) -> None:
    assert say(written, "cmn") == said


def test_numbers_are_chinese_numerals_with_their_zero() -> None:
    assert mandarin.cardinal(12) == "十二"
    assert mandarin.cardinal(10_005) == "一万零五"  # the gap is said as 零
    assert mandarin.year("2026") == "二零二六"
