"""What Spanish, French, Italian and Portuguese share: numbers written "1.250,50", "1 250,50", "2,5" (and
"25.50" the English way), money in the local conventions, numeric dates day first, clock times "14h30" /
"14:30", opening hours "9-18 h", percentages, temperatures, ranges, units, ordinals, phone numbers in
groups. One language is one ``Latin`` table (its words and conventions) in its own module; the rules
are the same for the four, built here from the kinds of ``text.rules``.

The spoken forms are plain words of the language, which its G2P reads (espeak-ng). Checked by
``pytest tests/test_latin.py`` (the readings) and ``tests/test_locales_heard.py`` (heard by Whisper).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from streamvoice.text import number_words as nw
from streamvoice.text import rules as kind
from streamvoice.text.rules import Clock, Date, Language, Ordinal, Phone, Rule, alternatives

# A point before exactly one or two digits is a decimal point, before three a thousands separator.
_GROUP = "[.\u00a0\u202f ]"
NUM = rf"(?<!\d)(?:\d{{1,3}}(?:{_GROUP}\d{{3}})+(?:,\d+)?(?!\d|\.\d)|\d+,\d+|\d+\.\d{{1,2}}(?!\d|\.\d)|\d+)"


def latin_value(text: str) -> tuple[int, str]:
    """(whole, fraction digits) of a number written the Latin way; fraction "" when there is none."""
    if "," in text:
        whole, _, fraction = text.partition(",")
    elif re.fullmatch(r"\d+\.\d{1,2}", text):
        whole, _, fraction = text.partition(".")
    else:
        whole, fraction = text, ""
    return int(re.sub(r"\D", "", whole) or "0"), fraction


@dataclass(frozen=True)
class Currency:
    one: str
    many: str
    sub_one: str
    sub_many: str
    feminine: bool = False


@dataclass(frozen=True)
class Latin:
    """One Latin language's words and conventions."""

    lang: str
    currencies: dict[str, Currency]
    symbols: dict[str, str]  # what is written -> currency key ("€" "EUR" "euros" -> "EUR")
    default_dollar: str  # "$" alone
    cents_joiner: str  # "veinticinco euros *con* cincuenta"
    of_millions: str  # "un millón *de* euros"
    months: tuple[str, ...]
    first_day: str  # day 1 of a month: "uno", "premier", "primo", "primeiro"
    date: Callable[[str, str, str], str]  # (day, month, year words) -> the date
    clock: Callable[[str, int, str], str]  # (hour words, minutes, minute words) -> the time
    hours_word: tuple[str, str]  # "14h": (one hour, hours)
    percent: str
    degrees: tuple[str, str]
    fahrenheit: str
    to: str  # a range "10-15": "{a} a {b}"
    plus: str  # a country code: "+34"
    units: dict[str, tuple[str, str]]
    ordinal_marks: str  # a regex of what follows the digits of an ordinal
    feminine_hours: bool = True
    degree_ordinal_nouns: str = ""  # "1° lugar": the nouns a degree sign counts instead of degrees
    area_code_as_number: bool = False  # "(11) 98765-4321": "onze", as Brazilians say it


def day_month_year(day: str, month: str, year: str) -> str:
    return f"{day} {month} {year}".strip()


def day_de_month_de_year(day: str, month: str, year: str) -> str:
    return f"{day} de {month} de {year}" if year else f"{day} de {month}"


class Reader:
    """How one Latin language says each kind's values (the table's words over the shared conventions)."""

    def __init__(self, loc: Latin) -> None:
        self.loc = loc
        self.lang = loc.lang
        self.fam = nw.family(loc.lang)

    def said(self, n: int, feminine: bool = False) -> str:
        return nw.cardinal(n, self.lang, feminine)

    def number(self, text: str, feminine: bool = False) -> str:
        if sum(ch.isdigit() for ch in text) > nw.MAX_DIGITS:  # an id, not a quantity
            return nw.digits(text, self.lang)
        whole, fraction = latin_value(text)
        if fraction:
            return nw.decimal(whole, fraction, self.lang)
        return self.said(whole, feminine)

    def to(self, a: str, b: str) -> str:
        return self.loc.to.format(a=a, b=b)

    def money(self, written: str, amount: str) -> str:
        loc = self.loc
        cur = loc.currencies[
            loc.symbols.get(written) or loc.symbols.get(written.lower()) or loc.default_dollar
        ]
        whole, fraction = latin_value(amount)
        cents = int(fraction[:2].ljust(2, "0")) if fraction else 0
        if whole >= 10**6 and whole % 10**6 == 0 and not cents:
            if loc.of_millions == "de" and self.fam == "fr" and cur.many[:1] in "aeiouhé":
                return f"{self.said(whole)} d'{cur.many}"
            return f"{self.said(whole)} {loc.of_millions} {cur.many}"
        parts = []
        if whole or not cents:
            words = self.said(whole, cur.feminine)
            words = words if cur.feminine else nw.masculine_before_noun(words, self.fam)
            parts.append(f"{words} {cur.one if whole == 1 else cur.many}")
        if cents:
            words = nw.masculine_before_noun(self.said(cents), self.fam)
            if self.fam == "fr" and whole:  # "vingt-cinq euros cinquante"
                parts.append(words)
            else:
                parts.append(f"{words} {cur.sub_one if cents == 1 else cur.sub_many}")
        return f" {loc.cents_joiner} ".join(parts) if loc.cents_joiner else " ".join(parts)

    def clock(self, time: Clock) -> str:
        said_hour = self.said(time.hour, self.loc.feminine_hours)
        if time.said_hours:  # "14h", "22 h": the hour alone, with its word
            one, many = self.loc.hours_word
            return f"{said_hour} {one if time.hour == 1 else many}"
        return self.loc.clock(said_hour, time.minute, self.said(time.minute, self.fam == "pt"))

    def hours_span(self, a: str, b: str) -> str:  # "9-18 h": opening hours
        first, last = (self.said(int(x), self.loc.feminine_hours) for x in (a, b))
        return f"{self.to(first, last)} {self.loc.hours_word[1]}"

    def date(self, date: Date) -> str:
        day, month = int(date.day or 0), int(date.month)
        if not (1 <= day <= 31 and 1 <= month <= 12):
            return " ".join(self.said(int(p)) for p in (date.day, date.month, date.year) if p)
        day_said = self.loc.first_day if day == 1 else self.said(day)
        year = date.year or ""
        if len(year) == 2:
            year = "20" + year
        return self.loc.date(day_said, self.loc.months[month - 1], self.said(int(year)) if year else "")

    def percent(self, n: str) -> str:
        return f"{self.number(n)} {self.loc.percent}"

    def percent_span(self, a: str, b: str) -> str:  # "5-10 %"
        return f"{self.span(a, b)} {self.loc.percent}"

    def temperature(self, value: str, scale: str | None) -> str:
        digits = value.lstrip("+-−")
        sign = f"{nw.MINUS[self.fam]} " if value[:1] in "-−" else ""
        whole, fraction = latin_value(digits)
        one, many = self.loc.degrees
        amount = nw.masculine_before_noun(self.number(digits), self.fam)
        said = f"{sign}{amount} {one if whole == 1 and not fraction else many}"
        return f"{said} {self.loc.fahrenheit}" if scale == "F" else said

    def unit(self, n: str, unit: str) -> str:
        one, many = self.loc.units[unit]
        whole, fraction = latin_value(n)
        amount = nw.masculine_before_noun(self.number(n), self.fam)
        return f"{amount} {one if whole == 1 and not fraction else many}"

    def span(self, a: str, b: str) -> str:
        return self.to(self.number(a), self.number(b))

    def unit_span(self, a: str, b: str, unit: str) -> str:  # "10-15 min"
        return f"{self.span(a, b)} {self.loc.units[unit][1]}"

    def ordinal(self, n: Ordinal) -> str:
        mark = n.mark.lower()
        feminine = mark in ("ª", ".ª", "a", "re", "ère", "nde")
        if self.fam == "fr" and n.n == 2 and mark in ("nd", "nde"):
            return "seconde" if feminine else "second"
        said = nw.ordinal(n.n, self.lang, feminine)
        if self.fam == "es" and (mark in ("er", ".er") or (n.before_noun and not feminine)):
            said = re.sub(r"ero$", "er", said)  # before a noun: "1.er piso", "3.º piso": "primer", "tercer"
        return said

    def phone(self, number: Phone) -> str:
        groups = list(number.groups)
        if re.fullmatch(r"\d{1,3}(?: \d{3})+", number.written) and sum(map(len, groups)) < 9:
            return self.said(int("".join(groups)))  # "1 250 000": a number with spaces, not a phone
        said = []
        if number.country:
            said.append(f"{self.loc.plus} {self.said(int(number.country))}")
            groups = groups[1:]
        if self.loc.area_code_as_number and re.match(r"(?:\+\d{1,3}[\s.-]?)?\(\d{2}\)", number.written):
            said.append(self.said(int(groups[0])))
            groups = groups[1:]
        for g in groups:
            if self.fam == "fr" and len(g) == 2:  # "06 12 34": "zéro six, douze, trente-quatre"
                said.append(nw.digits(g, self.lang) if g[0] == "0" else self.said(int(g)))
            else:
                said.append(nw.digits(g, self.lang))
        return ", ".join(said)

    def plain(self, text: str) -> str:
        return self.number(text)


_HOUR = r"[01]?\d|2[0-3]"
PHONES = (
    r"(?<![\d.,])(?:\+(?P<cc>\d{1,3})[\s.-]?)?(?:\(\d{2,4}\)\s?|\d{2,4}[\s.-])\d{2,5}(?:[\s.-]\d{2,5}){1,3}(?!\d|,\d|\s?[€$£%°])",
    r"(?<![\d.,-])(?:\(\d{2}\)\s?)?9?\d{4}-\d{4}(?![\d-])",
)
DATES = (
    r"\b(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})\b",
    r"\b(?P<d>\d{1,2})[/.-](?P<mo>\d{1,2})[/.-](?P<y>\d{4}|\d{2})\b",
    r"\b(?P<d>[0-3]?\d)/(?P<mo>[01]\d)(?P<y>)\b(?!/)",
)
HOURS_SPAN = rf"\b(?P<a>{_HOUR})\s?[-–]\s?(?P<b>[01]?\d|2[0-4])\s?h\b(?![\w/])"
CLOCK = rf"\b(?P<h>{_HOUR})(?::|h|H)(?P<min>[0-5]\d)\b(?:\s?h\b)?"
HOURS = rf"\b(?P<h>{_HOUR})\s?(?P<hours>h)\b(?![\w/])"


def language(loc: Latin) -> Language:
    """The rules of one Latin language, in priority order."""
    read = Reader(loc)
    words = sorted(loc.symbols, key=len, reverse=True)
    before = "|".join(re.escape(s) for s in words if not s.isalpha())
    degree_ordinals: tuple[Rule, ...] = ()
    if loc.degree_ordinal_nouns:  # "4° piano": a count of floors, not degrees
        pattern = rf"\b(?P<n>\d+)(?P<mark>°)(?=\s+(?:{loc.degree_ordinal_nouns})\b)(?P<noun>)"
        degree_ordinals = (kind.ordinal(pattern, read.ordinal),)
    return Language(
        nw.family(loc.lang),
        rules=(
            *(kind.phone(p, read.phone) for p in PHONES),
            kind.money_before(before, NUM, read.money),
            kind.money_after(alternatives(words), NUM, read.money, end=r"(?![\w$€£])"),
            *(kind.date(p, read.date) for p in DATES),
            kind.span("hours_span", HOURS_SPAN, read.hours_span),
            kind.clock(CLOCK, read.clock),
            kind.clock(HOURS, read.clock),
            *degree_ordinals,
            kind.temperature(kind.degrees(NUM), read.temperature),
            kind.percent_range(NUM, read.percent_span),
            kind.percent(NUM, read.percent),
            kind.unit_range(NUM, loc.units, read.unit_span),
            kind.value_range(NUM, read.span),
            kind.unit(NUM, loc.units, read.unit, start=r"(?<![\w.,])", end=r"(?![\w/])"),
            kind.ordinal(
                rf"\b(?P<n>\d+)(?P<mark>{loc.ordinal_marks})(?![\w])(?=(?P<noun>\s+[^\W\d])?)", read.ordinal
            ),
            kind.number(NUM, read.plain),
        ),
    )


# What is written for the common currencies, in every Latin table.
EUR = {"€": "EUR", "EUR": "EUR", "euro": "EUR", "euros": "EUR"}
USD = {"US$": "USD", "USD": "USD", "$": "USD"}
GBP = {"£": "GBP", "GBP": "GBP"}
BRL = {"R$": "BRL", "BRL": "BRL"}
