"""Dynamic batching of decoder windows: windows of one size from different listeners share one model call.

Each model worker thread decodes its listener's next window as before; this sits between it and ONNX
Runtime. A window waits here (at most ``linger_s``) while another worker may still bring a window of the
same size, and the first to go runs the whole group as one batch and hands every row its outputs: the
dynamic batcher of an inference server, with the model worker threads as its clients. A window never
waits when no other worker is busy: a listener alone on the server gets exactly the unbatched path.

Which window sizes meet is the scheduler's business (``server.lane`` rounds sizes to a few buckets when
batching is on); this only groups what is the same shape.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

Feeds = dict[str, NDArray[Any]]
Outputs = list[NDArray[Any]]


@dataclass(eq=False)  # rows are compared by identity
class _Row:
    feeds: Feeds
    done: threading.Event = field(default_factory=threading.Event)
    outputs: Outputs | None = None
    error: BaseException | None = None


def stack_rows(rows: list[Feeds]) -> Feeds:
    """One feed dict with the rows along the batch axis. Arrays that broadcast to each other (a prior given
    as a scalar placeholder beside real per-channel statistics) are broadcast to one shape first."""
    stacked: Feeds = {}
    for name in rows[0]:
        arrays = [row[name] for row in rows]
        shape = np.broadcast_shapes(*(a.shape[1:] for a in arrays))
        stacked[name] = np.concatenate([np.broadcast_to(a, (a.shape[0], *shape)) for a in arrays], axis=0)
    return stacked


def split_rows(outputs: Outputs, count: int) -> list[Outputs]:
    """Each row's outputs, keeping a batch axis of one (as an unbatched call returns them)."""
    return [[out[i : i + 1] for out in outputs] for i in range(count)]


class DecodeBatcher:
    """Groups concurrent decoder calls of one shape into batched calls; thread-safe."""

    def __init__(
        self,
        run: Callable[[Feeds], Outputs],
        max_rows: int,
        linger_s: float = 0.01,
        busy: Callable[[], int] | None = None,
    ) -> None:
        """``run`` makes one (batched) model call; ``busy`` says how many model jobs are in progress on the
        server's workers (this thread's included): a window waits only while some of them could still
        bring another window."""
        self._run = run
        self.max_rows = max(1, max_rows)
        self.linger_s = linger_s
        self._busy = busy
        self._cv = threading.Condition()
        self._pending: dict[Hashable, list[_Row]] = {}
        self._inside = 0  # rows in ``decode`` whose call has not finished (waiting or computing)
        self.calls = 0
        self.rows = 0

    def decode(self, feeds: Feeds, key: Hashable) -> Outputs:
        """This window's outputs; ``key`` names its shape (rows with one key are stacked)."""
        row = _Row(feeds)
        with self._cv:
            self._inside += 1
            group = self._pending.setdefault(key, [])
            group.append(row)
            batch: list[_Row] | None = None
            if len(group) >= self.max_rows:
                batch = self._pending.pop(key)
            else:
                self._cv.notify_all()  # a waiting row of this key may now have company worth checking
                until = time.monotonic() + self.linger_s
                while batch is None and not row.done.is_set() and row in self._pending.get(key, ()):
                    left = until - time.monotonic()
                    if left <= 0 or not self._others_may_come():
                        batch = self._pending.pop(key)
                    else:
                        self._cv.wait(left)
        if batch is not None:
            self._compute(batch)
        row.done.wait()
        if row.error is not None:
            raise row.error
        assert row.outputs is not None
        return row.outputs

    def _others_may_come(self) -> bool:
        """Whether a model job not yet in here is running (and so may bring a window soon). Under the lock."""
        if self._busy is None:
            return False
        return self._busy() > self._inside

    def _compute(self, batch: list[_Row]) -> None:
        results: list[Outputs] = []
        error: BaseException | None = None
        try:
            if len(batch) == 1:
                results = [self._run(batch[0].feeds)]
            else:
                results = split_rows(self._run(stack_rows([r.feeds for r in batch])), len(batch))
        except BaseException as exc:  # every row of the batch fails with the call
            error = exc
        with self._cv:
            # The rows leave before they are woken: a woken worker that comes straight back with its next
            # window must not find itself counted twice (it would think nobody else may come).
            self._inside -= len(batch)
            if error is None:
                self.calls += 1
                self.rows += len(batch)
            self._cv.notify_all()  # waiting rows re-check whether anyone else may still come
        for k, r in enumerate(batch):
            if error is None:
                r.outputs = results[k]
            else:
                r.error = error
            r.done.set()
