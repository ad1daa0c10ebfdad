"""``text.languages.hindi``: rupees and paise, clock times with बजे, ordinals and ranges, as a Hindi speaker reads
them (lakh and crore, not millions)."""

from __future__ import annotations

import pytest

from streamvoice.text.languages import hindi
from streamvoice.text.normalize import say

READINGS = [
    ("कीमत ₹1,25,000 है।", "कीमत एक लाख पच्चीस हज़ार रुपये है।"),
    ("Rs. 12.50 दें।", "बारह रुपये पचास पैसे दें।"),
    ("रात 10:00 बजे।", "रात दस बजे।"),
    ("दोपहर 2:30 बजे।", "दोपहर ढाई बजे।"),
    ("यह 5वीं बार है।", "यह पाँचवीं बार है।"),
    ("10-15 मिनट", "दस से पंद्रह मिनट"),
]


@pytest.mark.parametrize(("written", "said"), READINGS)
def test_values_are_read_as_a_hindi_speaker_says_them(written: str, said: str) -> None:
    assert say(written, "hi") == said


def test_numbers_count_in_lakh_and_crore() -> None:
    assert hindi.cardinal(125_000) == "एक लाख पच्चीस हज़ार"
    assert hindi.cardinal(20_000_000) == "दो करोड़"
