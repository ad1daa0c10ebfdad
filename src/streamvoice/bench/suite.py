"""Run every benchmark in turn (each prints its table and writes results/<name>.json).

Run: ``python -m streamvoice.bench.suite [--quick] [--plots docs/img]`` or ``make bench``.
"""

from __future__ import annotations

import argparse
import importlib
import time
from pathlib import Path

from streamvoice.bench.registry import BENCHMARKS


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer trials (a smoke run, not for publishing)")
    parser.add_argument("--plots", type=Path, default=Path("docs/img"))
    args = parser.parse_args(argv)
    import onnxruntime as ort

    for bench in BENCHMARKS:
        if bench.needs_gpu and "CUDAExecutionProvider" not in ort.get_available_providers():
            print(f"\n=== {bench.name}: skipped, it needs ONNX Runtime's CUDA provider (onnxruntime-gpu) ===")
            continue
        started = time.perf_counter()
        print(f"\n=== {bench.name} ===")
        argv_ = [
            a.replace("{plots}", str(args.plots)) for a in (bench.quick_args if args.quick else bench.args)
        ]
        importlib.import_module(f"streamvoice.bench.{bench.name}").main(argv_)
        print(f"({bench.name}: {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
