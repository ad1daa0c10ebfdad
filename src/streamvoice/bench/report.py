"""docs/benchmarks.md from results/*.json, so every number in the doc comes from a run: each benchmark's
section is rendered by its own module's ``report`` (beside the measurement that makes its JSON), in the
registry's order.

Run: ``python -m streamvoice.bench.report [--results results] [--out docs/benchmarks.md]``
"""

from __future__ import annotations

import argparse
import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamvoice.bench.registry import BENCHMARKS


def _load(folder: Path, name: str) -> dict[str, Any] | None:
    path = folder / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def renderer(name: str) -> Callable[[dict[str, Any]], str]:
    """The ``report`` of ``streamvoice.bench.<name>``."""
    fn: Callable[[dict[str, Any]], str] = importlib.import_module(f"streamvoice.bench.{name}").report
    return fn


def render(folder: Path, preamble: str = "") -> str:
    parts = [preamble]
    machine = None
    for bench in BENCHMARKS:
        data = _load(folder, bench.name)
        parts.append(f"## {bench.title}\n\n`{bench.command}`\n")
        if data is None:
            parts.append("_not run yet_\n")
            continue
        machine = machine or data.get("machine")
        parts.append(renderer(bench.name)(data) + "\n")
    if machine:
        parts.insert(
            1,
            f"Measured on: {machine['processor']}, {machine['cpu_count']} cores, {machine['platform']}, "
            f"Python {machine['python']} ({machine['when']}).\n",
        )
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks.md"))
    parser.add_argument("--preamble", type=Path, default=Path("docs/benchmarks.intro.md"))
    args = parser.parse_args(argv)
    preamble = args.preamble.read_text() if args.preamble.exists() else "# Benchmarks\n"
    args.out.write_text(render(args.results, preamble))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
