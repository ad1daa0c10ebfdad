"""Another process on the machine: a busy loop taking a share of one core, as a local LLM or a noisy
neighbour would (``bench.capacity --cpu-load``, ``bench.noisy_neighbour``)."""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from collections.abc import Iterator


def busy_loop(duty: float, period_s: float = 0.1) -> None:
    """Spin ``duty`` of every period and sleep the rest: a steady co-tenant on one core."""
    while True:
        start = time.perf_counter()
        while time.perf_counter() - start < duty * period_s:
            pass
        time.sleep((1.0 - duty) * period_s)


@contextlib.contextmanager
def co_tenant(load: float) -> Iterator[None]:
    """A process taking ``load`` of one core for as long as the block runs (none for 0)."""
    if not 0.0 <= load <= 1.0:
        raise ValueError(f"--cpu-load is a fraction of one core, 0 to 1; got {load}")
    if load == 0.0:
        yield
        return
    process = multiprocessing.get_context("spawn").Process(target=busy_loop, args=(load,), daemon=True)
    process.start()
    try:
        yield
    finally:
        process.terminate()
        process.join()
