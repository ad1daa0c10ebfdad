"""What language models write, said as a person would read it: money, clock times, dates, phone numbers,
URLs and emails, units and temperatures, percentages, ordinals, years and decades, ranges, versions,
titles and abbreviations, symbols and emoji.

Pure functions over a chunk of text. The result keeps the caller's words: each ``Token`` is a span of the
original text with what is said for it, so word timings can name "$12.50" (the caller's word) with the
times of "twelve dollars fifty" (Kokoro-FastAPI's users report exactly this broken: timings that name the
expansion, "nine thirtyPM").

English is normalised here; Spanish, French, Italian, Portuguese, Japanese, Mandarin and Hindi by their
rules in ``text.locales``, ``text.japanese``, ``text.mandarin`` and ``text.hindi`` (numbers in words from
``text.number_words``), after what is language-neutral (URLs, emails, emoji and symbols). The language is
the voice's or the message's ``lang``: "3/4/2026" is March 4 in American English, 3 April in British.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from streamvoice.text.language_rules import language_rules
from streamvoice.text.numbers import cardinal, decimal, digits, ordinal, plural, year
from streamvoice.text.pronounce import END, PHONEMES, SAY, SEP, SPACE


@dataclass(frozen=True)
class Token:
    """A span of the caller's text and what is said for it ("" when nothing is: an emoji)."""

    original: str
    spoken: str
    space_before: bool = True


Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], str]]  # the same shape in every rules module

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
    "km": "kilometer",
    "m": "meter",
    "cm": "centimeter",
    "mm": "millimeter",
    "mi": "mile",
    "ft": "foot",
    "in": "inch",
    "kg": "kilogram",
    "g": "gram",
    "mg": "milligram",
    "lb": "pound",
    "lbs": "pound",
    "oz": "ounce",
    "l": "liter",
    "L": "liter",
    "ml": "milliliter",
    "mph": "miles per hour",
    "km/h": "kilometers per hour",
    "kph": "kilometers per hour",
    "h": "hour",
    "hr": "hour",
    "hrs": "hour",
    "min": "minute",
    "mins": "minute",
    "s": "second",
    "sec": "second",
    "secs": "second",
    "ms": "millisecond",
    "KB": "kilobyte",
    "MB": "megabyte",
    "GB": "gigabyte",
    "TB": "terabyte",
    "kWh": "kilowatt hour",
    "kW": "kilowatt",
    "W": "watt",
    "V": "volt",
    "Hz": "hertz",
    "kHz": "kilohertz",
    "MHz": "megahertz",
    "GHz": "gigahertz",
}
ABBREVIATIONS = {
    "Dr.": "Doctor",
    "Mr.": "Mister",
    "Mrs.": "Missus",
    "Ms.": "Miz",
    "Prof.": "Professor",
    "Jr.": "Junior",
    "Sr.": "Senior",
    "Mt.": "Mount",
    "Ave.": "Avenue",
    "Blvd.": "Boulevard",
    "Rd.": "Road",
    "Dept.": "Department",
    "approx.": "approximately",
    "etc.": "et cetera",
    "e.g.": "for example",
    "i.e.": "that is",
    "vs.": "versus",
    "vs": "versus",
    "hrs": "hours",
    "mins": "minutes",
    "w/": "with",
    "w/o": "without",
}
SYMBOLS = {"&": "and", "+": "plus", "=": "equals", "@": "at", "×": "times", "÷": "divided by"}
EMOJI = re.compile(
    "[\U0001f000-\U0001faff\U00002600-\U000027bf\U0001f1e6-\U0001f1ff\ufe0f\u200d\u2b00-\u2bff\u2300-\u23ff]+"
)

_NUM = r"(?<!\d)(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"  # (?<!\d): linear on a digit run
_AMPM = r"(?:(?P<ampm>[aApP])\.\s?[mM]\.|(?P<ampm2>[aApP])\s?[mM])(?![A-Za-z])"
_TAIL = r"(?<![.,;:!?)\]'\"])"  # a URL never ends in the sentence's punctuation


def _amount(number: str) -> float:
    return float(number.replace(",", ""))


def _number(number: str) -> str:
    return decimal(number) if "." in number else cardinal(int(number.replace(",", "")))


def _money(m: re.Match[str]) -> str:
    major, minor = CURRENCIES[m["cur"]]
    amount = m["amount"]
    scale = MAGNITUDES.get((m["mag"] or "").lower()) or m["word"]  # "$1.2M", "$2 billion"
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


def _clock(hour: int, minute: int, ampm: str | None) -> str:
    said = cardinal(hour)
    if minute:
        said += f" {'oh ' + cardinal(minute) if minute < 10 else cardinal(minute)}"
    elif ampm is None and hour > 12:
        said += " hundred"
    if ampm:
        said += " a m" if ampm.lower() == "a" else " p m"
    elif minute == 0 and hour <= 12:
        said += " o'clock"
    return said


def _time(m: re.Match[str]) -> str:
    return _clock(int(m["h"]), int(m["min"] or 0), m["ampm"] or m["ampm2"])


def _with_year(said: str, m: re.Match[str]) -> str:
    return f"{said} {year(int(m['year']))}" if m["year"] else said


def _month_day(m: re.Match[str]) -> str:
    return _with_year(f"{_MONTH_OF[m['month'][:3].lower()]} {ordinal(int(m['day']))}", m)


def _day_month(m: re.Match[str]) -> str:
    the = "" if " of " in m.group() else "the "
    return _with_year(f"{the}{ordinal(int(m['day']))} of {_MONTH_OF[m['month'][:3].lower()]}", m)


def _iso_date(m: re.Match[str]) -> str:
    month = int(m["mo"])
    if not 1 <= month <= 12 or not 1 <= int(m["d"]) <= 31:
        return f"{digits(m['y'])} {digits(m['mo'])} {digits(m['d'])}"
    return f"{MONTHS[month - 1]} {ordinal(int(m['d']))} {year(int(m['y']))}"


def _us_date(m: re.Match[str]) -> str:
    return _numeric_date(int(m["a"]), int(m["b"]), m["y"])


def _uk_date(m: re.Match[str]) -> str:
    day, month, y = int(m["a"]), int(m["b"]), m["y"]
    if not 1 <= month <= 12 or not 1 <= day <= 31:
        return f"{cardinal(day)} {cardinal(month)} {cardinal(int(y))}"
    full = int(y) + (2000 if len(y) == 2 else 0)
    return f"the {ordinal(day)} of {MONTHS[month - 1]} {year(full)}"


def _numeric_date(month: int, day: int, y: str) -> str:
    if not 1 <= month <= 12 or not 1 <= day <= 31:
        return f"{cardinal(month)} {cardinal(day)} {cardinal(int(y))}"
    full = int(y) + (2000 if len(y) == 2 else 0)
    return f"{MONTHS[month - 1]} {ordinal(day)} {year(full)}"


def _domain(host: str) -> str:
    return " dot ".join(host.split("."))


def _url(m: re.Match[str]) -> str:
    url = re.sub(r"^https?://", "", m.group())
    host, _, path = url.partition("/")
    said = "w w w dot " + _domain(host[4:]) if host.startswith("www.") else _domain(host)
    parts = [p for p in re.split(r"[/?#=&_-]+", path) if p]
    return " slash ".join([said, *parts]) if parts else said


def _email(m: re.Match[str]) -> str:
    user, _, host = m.group().partition("@")
    user_said = " dot ".join(p for p in re.split(r"[._]", user) if p)
    return f"{user_said} at {_domain(host)}"


def _temperature(m: re.Match[str]) -> str:
    value = m["t"]
    sign = "minus " if value.startswith("-") else ""
    scale = {"F": " Fahrenheit", "C": " Celsius", "K": " kelvin"}.get(m["scale"] or "", "")
    return f"{sign}{_number(value.lstrip('-+'))} degrees{scale}"


def _percent(m: re.Match[str]) -> str:
    return f"{_number(m['n'])} percent"


def _unit(m: re.Match[str]) -> str:
    name = UNITS[m["unit"]]
    amount = _amount(m["n"])
    if " per " in name:  # a rate reads as it is: "three miles per hour"
        said = name
    elif name == "foot" and amount != 1:
        said = "feet"
    else:  # the last word takes the plural: "two kilowatt hours"
        head, _, last = name.rpartition(" ")
        said = f"{head} {plural(last, amount)}".strip()
    return f"{_number(m['n'])} {said}"


def _range(m: re.Match[str]) -> str:
    return f"{_number(m['a'])} to {_number(m['b'])}"


def _ordinal(m: re.Match[str]) -> str:
    return ordinal(int(m["n"].replace(",", "")))


def _decade(m: re.Match[str]) -> str:
    """1990s "nineteen nineties", '80s "eighties", 1900s "nineteen hundreds", 2000s "two thousands"."""
    tens, century = int(m["tens"] or m["tens2"]), m["century"]
    if tens == 0:
        return "two thousands" if century == "20" else f"{cardinal(int(century))} hundreds"
    word = cardinal(tens)
    word = word[:-1] + "ies" if word.endswith("y") else word + "s"
    return f"{cardinal(int(century))} {word}" if century else word


def _plain_number(m: re.Match[str]) -> str:
    n = m.group()
    if re.fullmatch(r"1[1-9]\d\d|20\d\d", n):
        return year(int(n))
    return _number(n)


def _abbreviation(m: re.Match[str]) -> str:
    return ABBREVIATIONS[m.group()]


def _saint_or_street(m: re.Match[str]) -> str:
    return "Saint" if m["next"] else "Street"


def _symbol(m: re.Match[str]) -> str:
    return SYMBOLS[m.group().strip()]


def _hash_number(m: re.Match[str]) -> str:
    return f"number {cardinal(int(m['n']))}"


def _phone(m: re.Match[str]) -> str:
    area = m["area"] or m["area2"]
    groups = [g for g in (m["country"], area, m["exchange"], m["line"]) if g]
    return ", ".join(digits(g) for g in groups)


def _version(m: re.Match[str]) -> str:
    said = " point ".join(cardinal(int(p)) for p in (m["v"] or m["v2"]).split("."))
    return f"version {said}" if m["v"] else said


_ABBREVIATION = re.compile(
    "|".join(
        re.escape(a) + (r"(?=\s|$|[,;:!?])" if a[-1] in "./" else r"\b")
        for a in sorted(ABBREVIATIONS, key=len, reverse=True)
    )
)
_CUR = r"(?P<cur>[$€£¥])"
_MONTH = r"(?P<month>Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sept?(?:ember)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
_UNIT_NAMES = "|".join(sorted((re.escape(u) for u in UNITS), key=len, reverse=True))

# In priority order: an earlier rule's match is never re-read by a later one.
ENGLISH_RULES: tuple[Rule, ...] = (
    (re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"), _email),
    (re.compile(rf"(?:https?://|www\.)[^\s<>\"]+{_TAIL}"), _url),
    (
        re.compile(
            r"(?<![\w.-])[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:com|org|net|io|dev|ai|app|co|edu|gov|uk|de|fr|info)\b(?:/[^\s<>\"]*"
            + _TAIL
            + ")?"
        ),
        _url,
    ),
    (
        re.compile(
            r"(?<![\d.])(?:\+?(?P<country>1)[\s.-]?)?(?:\((?P<area>\d{3})\)\s?|(?P<area2>\d{3})[\s.-])"
            r"(?P<exchange>\d{3})[\s.-](?P<line>\d{4})(?!\d)"
        ),
        _phone,
    ),
    (re.compile(rf"{_CUR}(?P<a>{_NUM})\s?[-–]\s?[$€£¥]?(?P<b>{_NUM})(?![\d.])"), _money_range),
    (
        re.compile(
            rf"{_CUR}\s?(?P<amount>{_NUM})(?:\s?(?P<mag>[kKmMbBtT]|bn|BN|mm|MM)\b|\s(?P<word>thousand|million|billion|trillion)\b)?"
        ),
        _money,
    ),
    (re.compile(rf"\b(?P<h>[01]?\d|2[0-3]):(?P<min>[0-5]\d)(?:\s?{_AMPM})?"), _time),
    (re.compile(rf"\b(?P<h>1[0-2]|0?[1-9])(?P<min>)\s?{_AMPM}"), _time),
    (re.compile(r"\b(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})\b"), _iso_date),
    (re.compile(r"\b(?P<a>\d{1,2})/(?P<b>\d{1,2})/(?P<y>\d{4}|\d{2})\b"), _us_date),
    (
        re.compile(rf"\b{_MONTH}\.?\s(?P<day>[0-3]?\d)(?:st|nd|rd|th)?\b(?:,?\s(?P<year>\d{{4}})\b)?"),
        _month_day,
    ),
    (
        re.compile(rf"\b(?P<day>[0-3]?\d)(?:st|nd|rd|th)?\s(?:of\s)?{_MONTH}\b(?:,?\s(?P<year>\d{{4}})\b)?"),
        _day_month,
    ),
    (re.compile(r"(?<!\d)(?P<t>[-+]?\d+(?:\.\d+)?)\s?°\s?(?P<scale>[FCK])?\b"), _temperature),
    (re.compile(r"(?:\b(?P<century>1[0-9]|20)(?P<tens>[1-9]0|00)|'(?P<tens2>[1-9]0))'?s\b"), _decade),
    (re.compile(rf"(?P<n>{_NUM})\s?%"), _percent),
    (re.compile(r"\b[vV](?P<v>\d+(?:\.\d+)+)\b|\b(?P<v2>\d+\.\d+\.\d+)\b"), _version),
    (re.compile(rf"(?<![\d.,])(?P<a>{_NUM})\s?[-–]\s?(?P<b>{_NUM})(?![\d.,-])"), _range),
    (re.compile(rf"(?<![\w.])(?P<n>{_NUM})\s?(?P<unit>{_UNIT_NAMES})(?![\w/])"), _unit),
    (re.compile(r"\b(?P<n>\d{1,3}(?:,\d{3})*|\d+)(?:st|nd|rd|th)\b"), _ordinal),
    (re.compile(r"#(?P<n>\d+)\b"), _hash_number),
    (re.compile(r"\bSt\.(?=\s(?P<next>[A-Z])?)"), _saint_or_street),
    (_ABBREVIATION, _abbreviation),
    (re.compile(_NUM), _plain_number),
)
SHARED_RULES: tuple[Rule, ...] = (
    (EMOJI, lambda m: ""),
    (re.compile(r"(?<=\S)\s?[&+=×÷]\s?(?=\S)|(?<=\s)[&+=×÷@](?=\s)"), _symbol),
    (re.compile(r"(?<=[A-Za-z])/(?=[A-Za-z])"), lambda m: " "),
    (re.compile(r"[*_~^|<>\\{}\[\]`]+"), lambda m: " "),
)


def _said_span(m: re.Match[str]) -> str:
    return m[2].replace(SPACE, " ")


def _phoneme_span(m: re.Match[str]) -> str:
    return f"{PHONEMES}{m[2]}{END}"  # kept marked: planning hands these to the model as they are


# Spans the caller marked (SSML, inline phonemes, the lexicon): taken as they are, before any rule.
MARKED_RULES: tuple[Rule, ...] = (
    (re.compile(f"{SAY}([^{SEP}{END}]*){SEP}([^{END}]*){END}"), _said_span),
    (re.compile(f"{PHONEMES}([^{SEP}{END}]*){SEP}([^{END}]*){END}"), _phoneme_span),
)


@functools.cache  # built once per language, not for every chunk planned
def rules_for(lang: str, values: bool = True) -> tuple[Rule, ...]:
    """Each language's rules after the marked spans and what is neutral (URLs, emails, symbols).
    ``values=False`` leaves out the non-English languages' value rules: the path before issue #33, which
    ``bench.languages`` measures against."""
    if lang.startswith("en"):
        english = ENGLISH_RULES
        if lang != "en-us":  # the rest of the English-speaking world writes the day first
            english = tuple((p, _uk_date if say is _us_date else say) for p, say in ENGLISH_RULES)
        return (*MARKED_RULES, *english[:4], *SHARED_RULES, *english[4:])  # "+1" is no sum
    own = language_rules(lang) if values else ()
    return (*MARKED_RULES, *ENGLISH_RULES[:3], *own, *SHARED_RULES)


def normalize(text: str, lang: str = "en-us", values: bool = True) -> list[Token]:
    """The text as tokens: spans rules rewrote, and the words between them as they were."""
    claims: list[tuple[int, int, str]] = []  # kept sorted; claims never overlap, so neighbours tell
    for pattern, say in rules_for(lang, values):
        for m in pattern.finditer(text):
            a, b = m.span()
            at = bisect.bisect_left(claims, (a, b))
            if a == b or (at and claims[at - 1][1] > a) or (at < len(claims) and claims[at][0] < b):
                continue
            try:
                spoken = say(m)
            except (ValueError, KeyError, IndexError):  # a rule's bug on this span: read it as written
                continue
            claims.insert(at, (a, b, spoken))
    tokens: list[Token] = []
    at = 0
    for a, b, spoken in claims:
        tokens.extend(_plain(text[at:a], at == 0 or text[at - 1].isspace()))
        original = text[a:b].strip()
        if original[:1] in (SAY, PHONEMES):  # a marked span: the caller's own word is inside it
            original = original[1:].split(SEP, 1)[0].replace(SPACE, " ")
        tokens.append(Token(original, spoken, a == 0 or text[a - 1].isspace() or text[a].isspace()))
        at = b
    tokens.extend(_plain(text[at:], at == 0 or (at <= len(text) and text[at - 1 : at].isspace())))
    return tokens


def _plain(segment: str, space_before: bool) -> Iterable[Token]:
    for i, m in enumerate(re.finditer(r"\S+", segment)):
        before = space_before if i == 0 and m.start() == 0 else True
        yield Token(m.group(), m.group(), before)


def spoken_text(tokens: list[Token]) -> str:
    """What the G2P reads: the spoken forms joined as the text joined them; two spoken words never run
    together (a rule's output next to a letter gets a space)."""
    out = ""
    for token in tokens:
        if not token.spoken:
            continue
        joined = bool(out) and not token.space_before
        if joined and _apart(out[-1], token.spoken[0]):
            joined = False
        out += token.spoken if joined or not out else " " + token.spoken
    return " ".join(out.split())


def _apart(left: str, right: str) -> bool:
    """Two words that would run together; Japanese and Chinese write none of the spaces between words."""
    return left.isalnum() and right.isalnum() and not (_wide(left) or _wide(right))


def _wide(ch: str) -> bool:
    return ord(ch) >= 0x2E80


def say(text: str, lang: str = "en-us", values: bool = True) -> str:
    """The text as it will be read (what the docs' table and the tests show)."""
    return spoken_text(normalize(text, lang, values))


# One line per language with a value in it, read once at start so the number engine's import and the
# rules' compile happen then (``KokoroEngine.warm_up``), never on a caller's first request.
_WARM_TEXT = "1.234,50 € 14:30 12/03/2026 20% 3.5 km 第3 ¥1,280 ₹499"


def warm(lang: str) -> None:
    say(_WARM_TEXT, lang)
