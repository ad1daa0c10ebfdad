"""``text.numbers``: English number words, pure and without a language pack (num2words is in the English one)."""

from __future__ import annotations

from streamvoice.text.numbers import MAX_CARDINAL, cardinal, decimal, digits, ordinal, plural, year


def test_numbers() -> None:
    assert cardinal(0) == "zero" and cardinal(101) == "one hundred one"
    assert cardinal(1_000_001) == "one million one"
    assert ordinal(22) == "twenty-second" and ordinal(100) == "one hundredth" and ordinal(12) == "twelfth"
    assert year(1900) == "nineteen hundred" and year(2010) == "twenty ten" and year(2000) == "two thousand"


def test_decimals_digits_and_plurals() -> None:
    assert decimal("3.14") == "three point one four"
    assert digits("407") == "four zero seven"
    assert plural("dollar", 1) == "dollar" and plural("dollar", 2) == "dollars"


def test_past_a_quadrillion_a_number_is_read_digit_by_digit() -> None:
    assert cardinal(MAX_CARDINAL - 1).startswith("nine hundred ninety-nine trillion")
    assert cardinal(MAX_CARDINAL) == "one" + " zero" * 15  # an id, not a quantity
