"""One piece's audio crossing from the model's worker thread to the event loop, window by window."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Final, Protocol

import numpy as np
from numpy.typing import NDArray

from streamvoice.engine.alignment import WordTime

_END: Final = object()  # the piece's last window was delivered
_CANCELLED: Final = object()


@dataclass(frozen=True)
class Words:
    """The piece's word times, in ms from its first sample; delivered before its first window."""

    times: list[WordTime]


class Decoder(Protocol):
    """What decodes the piece (a listener's lane), told when its audio is taken or abandoned."""

    def taken(self, samples: int) -> None: ...

    def abandoned(self, sink: PieceAudio) -> None: ...


class PieceAudio:
    """One piece's audio as the worker thread decodes it, window by window, handed to the event loop.

    Everything reaches the loop through one queue, in order: windows, then exactly one end marker (done,
    failed with an exception, or cancelled). The lane is told when the consumer has taken a window, so it
    can stop decoding for a listener whose audio is piling up unsent.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, lane: Decoder | None = None) -> None:
        self._loop = loop
        self._lane = lane
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._ended = False
        self.abandoned = False

    # -- worker thread ------------------------------------------------------------------------------
    def push(self, window: NDArray[np.float32]) -> None:
        self._post(window)

    def words(self, times: list[WordTime]) -> None:
        self._post(Words(times))

    def finish(self) -> None:
        """The last window was pushed (pushes are delivered first: one queue, in order)."""
        self._post(_END)

    def fail(self, exc: BaseException) -> None:
        self._post(exc)

    def _post(self, item: Any) -> None:
        with contextlib.suppress(RuntimeError):  # loop closed: nobody is listening
            self._loop.call_soon_threadsafe(self._deliver, item)

    # -- event loop ---------------------------------------------------------------------------------
    def _deliver(self, item: Any) -> None:
        if self._ended:
            if isinstance(item, np.ndarray):
                self._taken(item.size)  # decoded after the listener left: nobody will take it
            return
        if not isinstance(item, np.ndarray | Words):
            self._ended = True
        self._queue.put_nowait(item)

    def _taken(self, samples: int) -> None:
        if self._lane is not None:
            self._lane.taken(samples)

    def cancel(self) -> None:
        """Abandon the piece: the lane stops decoding it, and windows not yet taken are released."""
        self.abandoned = True
        if self._lane is not None:
            self._lane.abandoned(self)
        if self._ended:
            return
        self._ended = True
        released = 0
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if isinstance(item, np.ndarray):
                released += item.size
        self._taken(released)
        self._queue.put_nowait(_CANCELLED)

    async def windows(self) -> AsyncIterator[NDArray[np.float32] | Words]:
        """The word times, then windows in order until the piece ends or is cancelled; raises the model's
        exception."""
        while True:
            item = await self._queue.get()
            if isinstance(item, Words):
                yield item
            elif isinstance(item, np.ndarray):
                yield item
                self._taken(item.size)  # the consumer came back for more: it has dealt with this one
            elif item is _END or item is _CANCELLED:
                return
            else:
                raise item
