"""The one rule engine of ``text/``: a rule is where a value is written (a pattern) and how it is said (a reading
of the kind's values); each language lists its rules, in priority order, from the kinds below over its own
tables (``text/languages/``). A kind is written once here: what it matches by default, which values it reads
out of a match, and how a language's reading gets them; a language brings its words, its marks and, where its
writing differs (phone numbers, dates, clock times, ordinals), its patterns.

``claims`` applies rules to a text: an earlier rule's span is never re-read by a later one. Every
number-led pattern starts only where a digit run starts (``(?<!\\d)``), so a long run costs linear time
(``pytest tests/test_latin.py -k square``). Checked by ``pytest tests/test_rules.py``.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Rule:
    kind: str
    pattern: re.Pattern[str]
    read: Callable[[re.Match[str]], str]


@dataclass(frozen=True)
class SymbolWords:
    """What a language says for the symbols between words and the parts of web and mail addresses: data each
    language module gives (``text.neutral`` builds the shared rules over it)."""

    and_: str
    plus: str
    equals: str
    at: str
    times: str
    divided_by: str
    dot: str
    slash: str
    www: str  # "www." said letter by letter


@dataclass(frozen=True)
class Language:
    """A language's value rules, in priority order; ``after_symbols`` are tried after the neutral symbol rules
    (English: "+1 555 ..." is a phone number, then "+" between words is "plus", then its other values)."""

    family: str
    rules: tuple[Rule, ...]
    after_symbols: tuple[Rule, ...] = ()


def claims(text: str, rules: Iterable[Rule]) -> list[tuple[int, int, str]]:
    """(start, end, said) for every span a rule rewrites, sorted; a rule that fails on its span leaves that
    span as written (its bug never costs the chunk)."""
    found: list[tuple[int, int, str]] = []  # kept sorted; claims never overlap, so neighbours tell
    for rule in rules:
        for m in rule.pattern.finditer(text):
            a, b = m.span()
            at = bisect.bisect_left(found, (a, b))
            if a == b or (at and found[at - 1][1] > a) or (at < len(found) and found[at][0] < b):
                continue
            try:
                said = rule.read(m)
            except (ValueError, KeyError, IndexError):
                continue
            found.insert(at, (a, b, said))
    return found


@dataclass(frozen=True)
class Said:
    """A reading as data: a template over the kind's values in order, each number said by ``number`` and each
    name looked up in ``names`` ("{}から{}", "{} से {} प्रतिशत", "{}{}" with a unit table)."""

    template: str
    number: Callable[[str], str]
    names: Mapping[str, str] = field(default_factory=dict)

    def __call__(self, *values: str) -> str:
        return self.template.format(*(self.names.get(v) or self.number(v) for v in values))


def alternatives(names: Iterable[str]) -> str:
    """A table's keys as one alternation, longest first (so "km/h" is tried before "km")."""
    return "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))


# -- the values a kind reads out of its match ---------------------------------------------------------


@dataclass(frozen=True)
class Clock:
    hour: int
    minute: int
    part: str | None = None  # a part of the day written before ("下午", "शाम")
    half: bool = False  # 半 ("3時半")
    ampm: str | None = None  # "a" or "p"
    said_hours: bool = False  # the hour word was written after ("14 h", "22h")


@dataclass(frozen=True)
class Date:
    year: str | None
    month: str  # digits, or a month's name
    day: str | None
    written: str = ""


@dataclass(frozen=True)
class Phone:
    written: str
    groups: tuple[str, ...]  # digit groups, the country code (if any) first
    country: str | None


@dataclass(frozen=True)
class Ordinal:
    n: int
    mark: str  # what follows the digits ("º", "ème", "रा"); "" where a word precedes them (第3)
    before_noun: bool  # a word follows ("1.er piso")


def _group(m: re.Match[str], name: str) -> str | None:
    return m.groupdict().get(name) or None


# -- the kinds ----------------------------------------------------------------------------------------


def money(pattern: str, read: Callable[[str, str], str]) -> Rule:
    """``cur`` (the currency as written) and ``n`` (the amount as written)."""
    return Rule(
        "money", re.compile(pattern), lambda m: read(m["cur"] or m.groupdict().get("cur2") or "", m["n"])
    )


def money_before(currencies: str, num: str, read: Callable[[str, str], str]) -> Rule:
    """The currency written before the amount ("€12", "R$ 1,00"); ``currencies`` an alternation."""
    return money(rf"(?P<cur>{currencies})\s?(?P<n>{num})", read)


def money_after(currencies: str, num: str, read: Callable[[str, str], str], end: str = "") -> Rule:
    """The currency written after the amount ("12 €", "980円")."""
    return money(rf"(?P<n>{num})\s?(?P<cur>{currencies}){end}", read)


def clock(pattern: str, read: Callable[[Clock], str]) -> Rule:
    """``h`` and ``min`` (digits), and where a language writes them ``part``, ``han``, ``ampm`` / ``ampm2``,
    ``hours`` (the hour word after the digits)."""

    def values(m: re.Match[str]) -> str:
        minute = _group(m, "min")
        ampm = _group(m, "ampm") or _group(m, "ampm2")
        return read(
            Clock(
                int(m["h"]),
                int(minute or 0),
                _group(m, "part"),
                bool(_group(m, "han")),
                ampm.lower() if ampm else None,
                "hours" in m.re.groupindex,
            )
        )

    return Rule("clock", re.compile(pattern), values)


def date(pattern: str, read: Callable[[Date], str]) -> Rule:
    """``y``, ``mo`` and ``d`` as written (the month may be a name)."""
    return Rule(
        "date", re.compile(pattern), lambda m: read(Date(_group(m, "y"), m["mo"], _group(m, "d"), m.group()))
    )


def phone(pattern: str, read: Callable[[Phone], str]) -> Rule:
    """The digit groups as written; ``cc``, the country code, when the pattern names it."""

    def values(m: re.Match[str]) -> str:
        return read(Phone(m.group(), tuple(re.findall(r"\d+", m.group())), _group(m, "cc")))

    return Rule("phone", re.compile(pattern), values)


def temperature(pattern: str, read: Callable[[str, str | None], str]) -> Rule:
    """``t`` (signed, as written) and ``scale`` (C, F, K or none)."""
    return Rule("temperature", re.compile(pattern), lambda m: read(m["t"], _group(m, "scale")))


def degrees(num: str, marks: str = r"°\s?(?P<scale>[CF])?(?![A-Za-z])") -> str:
    return rf"(?P<t>[-+−]?{num})\s?{marks}"


def percent(num: str, read: Callable[[str], str], marks: str = "%") -> Rule:
    return Rule("percent", re.compile(rf"(?P<n>{num})\s?[{marks}]"), lambda m: read(m["n"]))


def span(kind: str, pattern: str, read: Callable[[str, str], str]) -> Rule:
    """Two values, ``a`` and ``b`` (a range, opening hours "9-18 h")."""
    return Rule(kind, re.compile(pattern), lambda m: read(m["a"], m["b"]))


def value_range(
    num: str,
    read: Callable[[str, str], str],
    marks: str = "-–",
    start: str = r"(?<![\d.,])",
    end: str = r"(?![\d.,-])",
) -> Rule:
    """Two numbers with a range mark between them ("10-15", "3～5")."""
    return span("range", rf"{start}(?P<a>{num})\s?[{marks}]\s?(?P<b>{num}){end}", read)


def percent_range(
    num: str,
    read: Callable[[str, str], str],
    marks: str = "-–",
    percent_marks: str = "%",
    start: str = r"(?<![\d.,])",
) -> Rule:
    pattern = rf"{start}(?P<a>{num})\s?[{marks}]\s?(?P<b>{num})\s?[{percent_marks}]"
    return Rule("percent_range", re.compile(pattern), lambda m: read(m["a"], m["b"]))


def unit(
    num: str,
    units: Mapping[str, object],
    read: Callable[[str, str], str],
    start: str = "",
    end: str = r"(?![A-Za-z/])",
) -> Rule:
    """A number and a unit of the language's table, ``n`` and ``unit``."""
    pattern = rf"{start}(?P<n>{num})\s?(?P<unit>{alternatives(units)}){end}"
    return Rule("unit", re.compile(pattern), lambda m: read(m["n"], m["unit"]))


def unit_range(
    num: str, units: Mapping[str, object], read: Callable[[str, str, str], str], start: str = r"(?<![\d.,])"
) -> Rule:
    pattern = rf"{start}(?P<a>{num})\s?[-–]\s?(?P<b>{num})\s?(?P<unit>{alternatives(units)})(?![\w/])"
    return Rule("unit_range", re.compile(pattern), lambda m: read(m["a"], m["b"], m["unit"]))


def ordinal(pattern: str, read: Callable[[Ordinal], str]) -> Rule:
    """``n``, and ``mark`` and ``noun`` where the language writes them."""

    def values(m: re.Match[str]) -> str:
        return read(Ordinal(int(m["n"].replace(",", "")), _group(m, "mark") or "", bool(_group(m, "noun"))))

    return Rule("ordinal", re.compile(pattern), values)


def counted(pattern: str, read: Callable[[int, str], str]) -> Rule:
    """A number and the counter after it (Japanese 分, 回, 人; a day 日), ``n`` and ``c``."""
    return Rule("counter", re.compile(pattern), lambda m: read(int(m["n"]), m["c"]))


def number(pattern: str, read: Callable[[str], str]) -> Rule:
    """Any number left: the whole match as written."""
    return Rule("number", re.compile(pattern), lambda m: read(m.group()))


def words(kind: str, pattern: str | re.Pattern[str], read: Callable[[str], str]) -> Rule:
    """A span read as a whole (an address, an abbreviation, a symbol): the match as written."""
    compiled = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
    return Rule(kind, compiled, lambda m: read(m.group()))


def groups(kind: str, pattern: str, read: Callable[[re.Match[str]], str]) -> Rule:
    """A kind only one language writes (English decades and versions): its reading takes the match."""
    return Rule(kind, re.compile(pattern), read)
