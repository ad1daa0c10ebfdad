"""The GPU's scheduler: pieces from every listener's model worker, batched into one model call at a time.

Model workers (one thread per piece in flight) hand in rows and wait; one GPU thread takes the next batch
by ``next_batch`` and runs it. The order is earliest deadline first: a row's deadline is when its listener
runs out of audio (now, for an answer's first piece, which therefore goes first), then arrival. Rows of the
most urgent row's token bucket go together, so a short first piece never waits behind a long piece's padding. Nothing here imports PyTorch: the policy is tested on a scripted
runner in the main suite (``tests/test_gpu_scheduler.py``).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any


@dataclass(order=True)
class Pending[R, S]:
    """A row waiting for the GPU; ordered by (deadline, arrival)."""

    deadline: float  # monotonic seconds: when its listener runs out of audio
    arrival: int
    row: R = field(compare=False)
    tokens: int = field(compare=False)
    done: Future[S] = field(compare=False, default_factory=Future)


def token_bucket(n: int, buckets: Sequence[int]) -> int:
    i = bisect.bisect_left(buckets, n)
    return buckets[i] if i < len(buckets) else n


def next_batch[R, S](
    pending: list[Pending[R, S]], max_rows: int, buckets: Sequence[int]
) -> list[Pending[R, S]]:
    """The most urgent row and, behind it, the next most urgent rows of its token bucket, up to ``max_rows``."""
    if not pending:
        return []
    ordered = sorted(pending)
    head = token_bucket(ordered[0].tokens, buckets)
    return [p for p in ordered if token_bucket(p.tokens, buckets) == head][:max_rows]


class GpuScheduler[R, S]:
    """Rows in from many threads, one batched call at a time on one GPU thread."""

    def __init__(
        self,
        run: Callable[[list[R]], list[S]],
        max_rows: int,
        buckets: Sequence[int],
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        self._run = run
        self.max_rows = max_rows
        self.buckets = tuple(buckets)
        self._on_batch = on_batch
        self._pending: list[Pending[R, S]] = []
        self._arrivals = 0
        self._wake = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="gpu-scheduler", daemon=True)
        self._thread.start()

    def submit(self, row: R, tokens: int, deadline: float) -> Future[S]:
        with self._wake:
            if self._closed:
                raise RuntimeError("the GPU scheduler is closed")
            item: Pending[R, S] = Pending(deadline, self._arrivals, row, tokens)
            self._arrivals += 1
            self._pending.append(item)
            self._wake.notify()
        return item.done

    def speak(self, row: R, tokens: int, deadline: float) -> S:
        return self.submit(row, tokens, deadline).result()

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._pending and not self._closed:
                    self._wake.wait()
                if self._closed and not self._pending:
                    return
                batch = next_batch(self._pending, self.max_rows, self.buckets)
                taken = {id(p) for p in batch}
                self._pending = [p for p in self._pending if id(p) not in taken]
            if self._on_batch is not None:
                self._on_batch(len(batch))
            try:
                results = self._run([p.row for p in batch])
            except BaseException as exc:  # every waiter hears the failure; the loop serves the next batch
                for p in batch:
                    p.done.set_exception(exc)
                continue
            for p, result in zip(batch, results, strict=True):
                p.done.set_result(result)

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        self._thread.join()

    def __enter__(self) -> GpuScheduler[R, S]:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
