"""Markdown for the benchmarks' reports: each benchmark renders its own section (its ``report``) with
these, and ``bench.report`` puts the sections together into docs/benchmarks.md."""

from __future__ import annotations

from typing import Any


def md_value(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return f"{value:,.{digits}f}"
    return str(value)


def md_table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)
