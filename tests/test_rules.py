"""``text.rules``: the one rule engine (an earlier rule's span is never re-read, a failing reading leaves its
span as written) and the kinds, each reading its values out of a match the same way for every language."""

from __future__ import annotations

import re

from streamvoice.text import rules as kind
from streamvoice.text.rules import Clock, Date, Ordinal, Phone, claims


def test_an_earlier_rule_wins_its_span_and_a_later_one_takes_the_rest() -> None:
    money = kind.money_before(r"\$", r"\d+", lambda cur, n: f"<{n} dollars>")
    plain = kind.number(r"\d+", lambda n: f"<{n}>")
    assert claims("$5 and 7", (money, plain)) == [(0, 2, "<5 dollars>"), (7, 8, "<7>")]
    assert claims("$5 and 7", (plain, money)) == [(1, 2, "<5>"), (7, 8, "<7>")]


def test_a_reading_that_fails_leaves_its_span_as_written() -> None:
    def broken(n: str) -> str:
        raise ValueError(n)

    assert claims("12 and 13", (kind.number(r"\d+", broken),)) == []


def test_each_kind_reads_its_values_the_same_way() -> None:
    seen: list[object] = []

    def keep(value: object) -> str:
        seen.append(value)
        return "x"

    rules = (
        kind.clock(r"(?P<part>pm )?(?P<h>\d+):(?P<min>\d+)", keep),
        kind.clock(r"(?P<h>\d+)時(?P<han>半)", keep),
        kind.date(r"(?P<d>\d+)/(?P<mo>\d+)/(?P<y>\d+)", keep),
        kind.phone(r"\+(?P<cc>\d+) \d+ \d+", keep),
        kind.ordinal(r"(?P<n>\d+)(?P<mark>º)(?P<noun> piso)?", keep),
    )
    claims("pm 9:05, 3時半, 3/4/2026, +34 612 345, 3º piso", rules)
    assert seen == [
        Clock(9, 5, "pm "),
        Clock(3, 0, half=True),
        Date("2026", "4", "3", "3/4/2026"),
        Phone("+34 612 345", ("34", "612", "345"), "34"),
        Ordinal(3, "º", True),
    ]


def test_table_keys_are_tried_longest_first() -> None:
    pattern = re.compile(kind.alternatives({"km": 1, "km/h": 2, "m": 3}))
    assert pattern.match("km/h").group() == "km/h"  # type: ignore[union-attr]
