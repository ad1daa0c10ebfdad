"""Run every benchmark in turn (each prints its table and writes results/<name>.json).

Run: ``python -m streamvoice.bench.suite [--quick] [--plots docs/img]`` or ``make bench``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamvoice.bench import capacity, continuity, e2e, encodings, profile, transport, windows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer trials (a smoke run, not for publishing)")
    parser.add_argument("--plots", type=Path, default=Path("docs/img"))
    args = parser.parse_args(argv)
    q = args.quick
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("profile", lambda: profile.main([])),
        ("transport", lambda: transport.main(["--trials", "3" if q else "20"])),
        ("windows", lambda: windows.main(["--trials", "1" if q else "3", "--plots", str(args.plots)])),
        ("e2e", lambda: e2e.main(["--runs", "1" if q else "3"])),
        ("continuity", lambda: continuity.main(["--plot", str(args.plots / "continuity.png")])),
        ("capacity", lambda: capacity.main(["--max-k", "2" if q else "4"])),
        ("encodings", lambda: encodings.main(["--clips", "4" if q else "24"])),
    ]
    for name, run in steps:
        started = time.perf_counter()
        print(f"\n=== {name} ===")
        run()
        print(f"({name}: {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
