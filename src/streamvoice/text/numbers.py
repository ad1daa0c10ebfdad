"""English number words: cardinals, ordinals, years, digit by digit. Pure and small, so text normalisation
needs no language pack (num2words lives in the English one)."""

from __future__ import annotations

ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen"
).split()
TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
SCALES = ((10**12, "trillion"), (10**9, "billion"), (10**6, "million"), (1000, "thousand"))
IRREGULAR_ORDINALS = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}
MAX_CARDINAL = 10**15  # past this a number is read digit by digit (an id, not a quantity)


def _under_thousand(n: int) -> str:
    words = []
    if n >= 100:
        words.append(f"{ONES[n // 100]} hundred")
        n %= 100
    if n >= 20:
        words.append(TENS[n // 10] + (f"-{ONES[n % 10]}" if n % 10 else ""))
    elif n or not words:
        words.append(ONES[n])
    return " ".join(words)


def cardinal(n: int) -> str:
    if n < 0:
        return "minus " + cardinal(-n)
    if n >= MAX_CARDINAL:
        return digits(str(n))
    if n < 1000:
        return _under_thousand(n)
    words = []
    for scale, name in SCALES:
        if n >= scale:
            words.append(f"{cardinal(n // scale)} {name}")
            n %= scale
    if n:
        words.append(_under_thousand(n))
    return " ".join(words)


def ordinal(n: int) -> str:
    words = cardinal(n)
    head, _, last = words.rpartition(" ")
    stem, dash, unit = last.rpartition("-")
    if unit in IRREGULAR_ORDINALS:
        unit = IRREGULAR_ORDINALS[unit]
    elif unit.endswith("y"):
        unit = unit[:-1] + "ieth"
    else:
        unit += "th"
    last = f"{stem}{dash}{unit}"
    return f"{head} {last}" if head else last


def year(n: int) -> str:
    """1999 "nineteen ninety-nine", 2005 "two thousand five", 2026 "twenty twenty-six", 1900 "nineteen
    hundred", 1905 "nineteen oh five"."""
    if not 1000 <= n <= 2999 or 2000 <= n <= 2009:
        return cardinal(n)
    high, low = divmod(n, 100)
    if low == 0:
        return f"{cardinal(high)} hundred"
    return f"{cardinal(high)} {'oh ' + ONES[low] if low < 10 else cardinal(low)}"


def decimal(text: str) -> str:
    """ "3.14" -> "three point one four"; "12.50" as a plain number -> "twelve point five zero"."""
    whole, _, fraction = text.partition(".")
    spoken = cardinal(int(whole.replace(",", "") or "0"))
    return f"{spoken} point {digits(fraction)}" if fraction else spoken


def digits(text: str) -> str:
    return " ".join(ONES[int(ch)] for ch in text if ch.isdigit())


def plural(word: str, amount: float) -> str:
    if amount == 1 or word.endswith("s"):
        return word
    if word.endswith(("ch", "sh", "x")):
        return word + "es"
    return word + "s"
