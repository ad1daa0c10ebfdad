"""English values as an English speaker reads them: money with its scale ("$1.2M"), clock times with a m / p m,
dates (month first in American English, day first elsewhere), temperatures, decades, percentages, versions,
ranges, units, ordinals, "#3", "St.", titles and abbreviations, and years among plain numbers.
Checked by ``pytest tests/test_english.py`` (and the table in ``docs/languages.md``).
"""

from __future__ import annotations

import re

from streamvoice.text import rules as kind
from streamvoice.text.numbers import cardinal, decimal, digits, ordinal, plural, year
from streamvoice.text.rules import Clock, Date, Language, Phone, Rule, Said, SymbolWords

MONTHS = "January February March April May June July August September October November December".split()
_MONTH_OF = {m[:3].lower(): m for m in MONTHS}  # "Sept" and "September" too: by their first three
CURRENCIES = {"$": ("dollar", "cent"), "€": ("euro", "cent"), "£": ("pound", "penny"), "¥": ("yen", "")}
MAGNITUDES = {
    "k": "thousand",
    "m": "million",
    "mm": "million",
    "b": "billion",
    "bn": "billion",
    "t": "trillion",
}
UNITS = {
    "km": "kilometer", "m": "meter", "cm": "centimeter", "mm": "millimeter", "mi": "mile", "ft": "foot",
    "in": "inch", "kg": "kilogram", "g": "gram", "mg": "milligram", "lb": "pound", "lbs": "pound",
    "oz": "ounce", "l": "liter", "L": "liter", "ml": "milliliter", "mph": "miles per hour",
    "km/h": "kilometers per hour", "kph": "kilometers per hour", "h": "hour", "hr": "hour", "hrs": "hour",
    "min": "minute", "mins": "minute", "s": "second", "sec": "second", "secs": "second", "ms": "millisecond",
    "KB": "kilobyte", "MB": "megabyte", "GB": "gigabyte", "TB": "terabyte", "kWh": "kilowatt hour",
    "kW": "kilowatt", "W": "watt", "V": "volt", "Hz": "hertz", "kHz": "kilohertz", "MHz": "megahertz",
    "GHz": "gigahertz",
}  # fmt: skip
ABBREVIATIONS = {
    "Dr.": "Doctor", "Mr.": "Mister", "Mrs.": "Missus", "Ms.": "Miz", "Prof.": "Professor", "Jr.": "Junior",
    "Sr.": "Senior", "Mt.": "Mount", "Ave.": "Avenue", "Blvd.": "Boulevard", "Rd.": "Road",
    "Dept.": "Department", "approx.": "approximately", "etc.": "et cetera", "e.g.": "for example",
    "i.e.": "that is", "vs.": "versus", "vs": "versus", "hrs": "hours", "mins": "minutes", "w/": "with",
    "w/o": "without",
}  # fmt: skip
SCALES = "thousand|million|billion|trillion"
TEMPERATURE_SCALES = {"F": " Fahrenheit", "C": " Celsius", "K": " kelvin"}

NUM = r"(?<!\d)(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"  # (?<!\d): linear on a digit run
_AMPM = r"(?:(?P<ampm>[aApP])\.\s?[mM]\.|(?P<ampm2>[aApP])\s?[mM])(?![A-Za-z])"
_CUR = "[$€£¥]"
_MAG = r"(?:\s?(?:[kKmMbBtT]|bn|BN|mm|MM)\b|\s(?:" + SCALES + r")\b)"
_MONTH = r"(?P<mo>Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sept?(?:ember)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"


def _number(written: str) -> str:
    return decimal(written) if "." in written else cardinal(int(written.replace(",", "")))


def _money(cur: str, written: str) -> str:
    """``written`` carries its scale when it has one: "1.2M", "2 billion"."""
    m = re.fullmatch(
        rf"(?P<amount>{NUM})(?:\s?(?P<mag>[kKmMbBtT]|bn|BN|mm|MM)|\s(?P<word>{SCALES}))?", written
    )
    assert m is not None
    major, minor = CURRENCIES[cur]
    amount = m["amount"]
    scale = MAGNITUDES.get((m["mag"] or "").lower()) or m["word"]
    if scale:
        return f"{_number(amount)} {scale} {plural(major, 2)}"
    whole, _, cents = amount.replace(",", "").partition(".")
    value = int(whole or "0")
    words = [f"{cardinal(value)} {plural(major, value)}"] if value or not cents else []
    if cents and int(cents[:2].ljust(2, "0")) and minor:
        c = int(cents[:2].ljust(2, "0"))
        words.append(f"{cardinal(c)} {plural(minor, c) if minor != 'penny' or c == 1 else 'pence'}")
    return " ".join(words) or f"zero {plural(major, 0)}"


def _money_range(m: re.Match[str]) -> str:
    major, _ = CURRENCIES[m["cur"]]
    return f"{_number(m['a'])} to {_number(m['b'])} {plural(major, 2)}"


def _clock(time: Clock) -> str:
    hour, minute, ampm = time.hour, time.minute, time.ampm
    said = cardinal(hour)
    if minute:
        said += f" {'oh ' + cardinal(minute) if minute < 10 else cardinal(minute)}"
    elif ampm is None and hour > 12:
        said += " hundred"
    if ampm:
        said += " a m" if ampm == "a" else " p m"
    elif minute == 0 and hour <= 12:
        said += " o'clock"
    return said


def _month(written: str) -> str:
    return _MONTH_OF[written[:3].lower()]


def _with_year(said: str, date: Date) -> str:
    return f"{said} {year(int(date.year))}" if date.year else said


def _month_day(date: Date) -> str:
    return _with_year(f"{_month(date.month)} {ordinal(int(date.day or 0))}", date)


def _day_month(date: Date) -> str:
    the = "" if " of " in date.written else "the "
    return _with_year(f"{the}{ordinal(int(date.day or 0))} of {_month(date.month)}", date)


def _iso_date(date: Date) -> str:
    month, day, y = int(date.month), int(date.day or 0), date.year or ""
    if not 1 <= month <= 12 or not 1 <= day <= 31:
        return f"{digits(y)} {digits(date.month)} {digits(date.day or '')}"
    return f"{MONTHS[month - 1]} {ordinal(day)} {year(int(y))}"


def _full_year(y: str) -> int:
    return int(y) + (2000 if len(y) == 2 else 0)


def _us_date(date: Date) -> str:
    """3/4/2026: March fourth; a date that cannot be is read as its numbers, in the written order."""
    month, day, y = int(date.month), int(date.day or 0), date.year or "0"
    if not 1 <= month <= 12 or not 1 <= day <= 31:
        return f"{cardinal(month)} {cardinal(day)} {cardinal(int(y))}"
    return f"{MONTHS[month - 1]} {ordinal(day)} {year(_full_year(y))}"


def _uk_date(date: Date) -> str:
    """3/4/2026: the third of April."""
    month, day, y = int(date.month), int(date.day or 0), date.year or "0"
    if not 1 <= month <= 12 or not 1 <= day <= 31:
        return f"{cardinal(day)} {cardinal(month)} {cardinal(int(y))}"
    return f"the {ordinal(day)} of {MONTHS[month - 1]} {year(_full_year(y))}"


def _phone(number: Phone) -> str:
    return ", ".join(digits(g) for g in number.groups)


def _temperature(value: str, scale: str | None) -> str:
    sign = "minus " if value.startswith("-") else ""
    return f"{sign}{_number(value.lstrip('-+'))} degrees{TEMPERATURE_SCALES.get(scale or '', '')}"


def _unit(n: str, unit: str) -> str:
    name = UNITS[unit]
    amount = float(n.replace(",", ""))
    if " per " in name:  # a rate reads as it is: "three miles per hour"
        said = name
    elif name == "foot" and amount != 1:
        said = "feet"
    else:  # the last word takes the plural: "two kilowatt hours"
        head, _, last = name.rpartition(" ")
        said = f"{head} {plural(last, amount)}".strip()
    return f"{_number(n)} {said}"


def _ordinal(n: kind.Ordinal) -> str:
    return ordinal(n.n)


def _decade(m: re.Match[str]) -> str:
    """1990s "nineteen nineties", '80s "eighties", 1900s "nineteen hundreds", 2000s "two thousands"."""
    tens, century = int(m["tens"] or m["tens2"]), m["century"]
    if tens == 0:
        return "two thousands" if century == "20" else f"{cardinal(int(century))} hundreds"
    word = cardinal(tens)
    word = word[:-1] + "ies" if word.endswith("y") else word + "s"
    return f"{cardinal(int(century))} {word}" if century else word


def _version(m: re.Match[str]) -> str:
    said = " point ".join(cardinal(int(p)) for p in (m["v"] or m["v2"]).split("."))
    return f"version {said}" if m["v"] else said


def _hash_number(written: str) -> str:
    return f"number {cardinal(int(written[1:]))}"


def _saint_or_street(m: re.Match[str]) -> str:
    return "Saint" if m["next"] else "Street"


def _abbreviation(written: str) -> str:
    return ABBREVIATIONS[written]


def _plain_number(written: str) -> str:
    if re.fullmatch(r"1[1-9]\d\d|20\d\d", written):
        return year(int(written))
    return _number(written)


_ABBREVIATION = "|".join(
    re.escape(a) + (r"(?=\s|$|[,;:!?])" if a[-1] in "./" else r"\b")
    for a in sorted(ABBREVIATIONS, key=len, reverse=True)
)
PHONE = (
    r"(?<![\d.])(?:\+?(?P<cc>1)[\s.-]?)?(?:\((?P<area>\d{3})\)\s?|(?P<area2>\d{3})[\s.-])"
    r"(?P<exchange>\d{3})[\s.-](?P<line>\d{4})(?!\d)"
)
NUMERIC_DATE = r"\b(?P<{0}>\d{{1,2}})/(?P<{1}>\d{{1,2}})/(?P<y>\d{{4}}|\d{{2}})\b"


def _values(numeric_date: Rule) -> tuple[Rule, ...]:
    """In priority order: an earlier rule's span is never re-read by a later one."""
    return (
        kind.groups(
            "money_range", rf"(?P<cur>{_CUR})(?P<a>{NUM})\s?[-–]\s?[$€£¥]?(?P<b>{NUM})(?![\d.])", _money_range
        ),
        kind.money(rf"(?P<cur>{_CUR})\s?(?P<n>{NUM}{_MAG}?)", _money),
        kind.clock(rf"\b(?P<h>[01]?\d|2[0-3]):(?P<min>[0-5]\d)(?:\s?{_AMPM})?", _clock),
        kind.clock(rf"\b(?P<h>1[0-2]|0?[1-9])(?P<min>)\s?{_AMPM}", _clock),
        kind.date(r"\b(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})\b", _iso_date),
        numeric_date,
        kind.date(rf"\b{_MONTH}\.?\s(?P<d>[0-3]?\d)(?:st|nd|rd|th)?\b(?:,?\s(?P<y>\d{{4}})\b)?", _month_day),
        kind.date(
            rf"\b(?P<d>[0-3]?\d)(?:st|nd|rd|th)?\s(?:of\s)?{_MONTH}\b(?:,?\s(?P<y>\d{{4}})\b)?", _day_month
        ),
        kind.temperature(r"(?<!\d)(?P<t>[-+]?\d+(?:\.\d+)?)\s?°\s?(?P<scale>[FCK])?\b", _temperature),
        kind.groups(
            "decade", r"(?:\b(?P<century>1[0-9]|20)(?P<tens>[1-9]0|00)|'(?P<tens2>[1-9]0))'?s\b", _decade
        ),
        kind.percent(NUM, Said("{} percent", _number)),
        kind.groups("version", r"\b[vV](?P<v>\d+(?:\.\d+)+)\b|\b(?P<v2>\d+\.\d+\.\d+)\b", _version),
        kind.value_range(NUM, Said("{} to {}", _number)),
        kind.unit(NUM, UNITS, _unit, start=r"(?<![\w.])", end=r"(?![\w/])"),
        kind.ordinal(r"\b(?P<n>\d{1,3}(?:,\d{3})*|\d+)(?:st|nd|rd|th)\b", _ordinal),
        kind.words("number_sign", r"#\d+\b", _hash_number),
        kind.groups("saint_or_street", r"\bSt\.(?=\s(?P<next>[A-Z])?)", _saint_or_street),
        kind.words("abbreviation", _ABBREVIATION, _abbreviation),
        kind.number(NUM, _plain_number),
    )


AMERICAN = Language(
    "en",
    rules=(kind.phone(PHONE, _phone),),
    after_symbols=_values(kind.date(NUMERIC_DATE.format("mo", "d"), _us_date)),
)
# The rest of the English-speaking world writes the day first.
BRITISH = Language(
    "en", rules=AMERICAN.rules, after_symbols=_values(kind.date(NUMERIC_DATE.format("d", "mo"), _uk_date))
)


# What this language says for symbols between words and the parts of web and mail addresses (``text.neutral``).
WORDS = SymbolWords(and_='and', plus='plus', equals='equals', at='at', times='times', divided_by='divided by', dot='dot', slash='slash', www='w w w')  # fmt: skip
