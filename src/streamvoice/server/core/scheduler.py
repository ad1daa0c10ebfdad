"""Which model call runs next, across every session on the server.

The model is the scarce resource (two cores run one call at a time well). Model calls go through one
priority queue served by worker threads, so the event loop never blocks and the order is a policy:

Earliest playback deadline first: a new session's first piece is due now; a later piece of a session that
already has seconds of audio buffered is due only when that audio runs out. The order and the size of the
window a job decodes per turn are one policy, this class's (``order_key``, ``requeue_key``, ``window_cap``);
``bench.capacity``'s arrival-order baseline is a subclass of its own. Checked by
``pytest tests/test_scheduler.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from streamvoice.server.core.window_sizing import window_cap

T = TypeVar("T")


@dataclass(frozen=True)
class Requeue:
    """Returned by a job that has more to do: run me again when my turn comes, at ``deadline``.

    A piece decodes window by window; handing the worker back between windows lets a new session's first
    window go ahead of another session's later windows whose audio is not due yet.
    """

    deadline: float


@dataclass(order=True)
class _Job:
    key: float
    seq: int
    fn: Callable[[], Any] = field(compare=False)
    future: asyncio.Future[Any] = field(compare=False)
    loop: asyncio.AbstractEventLoop = field(compare=False)


class SynthesisScheduler:
    def __init__(self, workers: int = 1) -> None:
        self.workers = workers
        self._heap: list[_Job] = []
        self._cv = threading.Condition()
        self._seq = itertools.count()
        self._threads: list[threading.Thread] = []
        self._stopping = False
        self._running = 0  # jobs on a worker right now

    def start(self) -> None:
        if self._threads:
            return
        self._stopping = False
        for i in range(self.workers):
            t = threading.Thread(target=self._run, name=f"synth-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, timeout: float = 5.0) -> None:
        with self._cv:
            self._stopping = True
            for job in self._heap:
                job.loop.call_soon_threadsafe(_cancel, job.future)
            self._heap.clear()
            self._cv.notify_all()
        for t in self._threads:
            t.join(timeout)
        self._threads.clear()

    @property
    def queue_depth(self) -> int:
        return len(self._heap)

    @property
    def running(self) -> int:
        """Jobs on a worker right now."""
        return self._running

    @property
    def alone(self) -> bool:
        """The calling job is the only model work running or waiting (its timing is uncontended)."""
        return self._running <= 1 and not self._heap

    # -- the policy ---------------------------------------------------------------------------------------
    def order_key(self, deadline: float | None, now: float) -> float:
        """Where a new job waits: by its playback deadline (none: due now)."""
        return now if deadline is None else deadline

    def requeue_key(self, key: float, deadline: float) -> float:
        """Where a job that handed its worker back between windows waits again: by its next deadline."""
        return deadline

    # The next window of a lane: sized by the deadlines (``window_sizing.window_cap``).
    window_cap = staticmethod(window_cap)

    def earliest_waiting(self) -> float | None:
        """The smallest key among jobs waiting for a worker: the most urgent deadline."""
        with self._cv:
            return self._heap[0].key if self._heap else None

    def submit(self, fn: Callable[[], T | Requeue], deadline: float | None = None) -> asyncio.Future[T]:
        """Queue a blocking call; cancelling the returned future before it starts skips the call."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        now = time.monotonic()
        key = self.order_key(deadline, now)
        with self._cv:
            if self._stopping:
                future.set_exception(RuntimeError("scheduler is stopping"))
                return future
            heapq.heappush(self._heap, _Job(key, next(self._seq), fn, future, loop))
            self._cv.notify()
        return future

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._heap and not self._stopping:
                    self._cv.wait()
                if self._stopping:
                    return
                job = heapq.heappop(self._heap)
                if job.future.cancelled():
                    continue
                self._running += 1
            try:
                result = job.fn()
            except BaseException as exc:  # the awaiting session turns it into an error frame
                _deliver(job, _fail, exc)
                result = None
            else:
                if not isinstance(result, Requeue):
                    _deliver(job, _resolve, result)
            finally:
                with self._cv:
                    self._running -= 1
                    if isinstance(result, Requeue) and not job.future.cancelled() and not self._stopping:
                        job.key = self.requeue_key(job.key, result.deadline)
                        heapq.heappush(self._heap, job)
                        self._cv.notify()


def _deliver(job: _Job, fn: Callable[[asyncio.Future[Any], Any], None], value: Any) -> None:
    # A closed loop (process shutting down) means nobody is waiting for this result.
    with contextlib.suppress(RuntimeError):
        job.loop.call_soon_threadsafe(fn, job.future, value)


def _resolve(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():
        future.set_result(result)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def _cancel(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.cancel()
