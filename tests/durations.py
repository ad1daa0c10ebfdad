"""The suite's modules by the seconds their tests took, longest first: the order ``conftest.SLOWEST_FIRST``
hands files to the pytest-xdist workers in.

    .venv/bin/python -m pytest -n 2 --dist loadfile --durations=0 > /tmp/durations.log
    .venv/bin/python -m tests.durations /tmp/durations.log
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

LINE = re.compile(r"\s*([\d.]+)s (?:call|setup|teardown)\s+(\S+?)::")


def seconds_per_module(report: str) -> Counter[str]:
    """Each module's setup, call and teardown seconds, summed, from pytest's ``--durations=0`` report."""
    totals: Counter[str] = Counter()
    for line in report.splitlines():
        if match := LINE.match(line):
            totals[Path(match.group(2)).name] += float(match.group(1))
    return totals


def main() -> None:
    totals = seconds_per_module(Path(sys.argv[1]).read_text())
    for name, seconds in totals.most_common(int(sys.argv[2]) if len(sys.argv) > 2 else 20):
        print(f'    "{name}",  # {seconds:.0f} s')


if __name__ == "__main__":
    main()
