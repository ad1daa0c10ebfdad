"""What waits to be sent on one connection, and the cap on what a client leaves unread.

Answers, replies and the connection's end are queued in order (the writer takes them one by one, so audio
never interleaves); notices go out at once beside them. Every frame leaves through ``deliver``, which the
reader's cap watches: at most ``MAX_PENDING_REPLIES`` wait unsent, past it the reader waits for the writer
(a client that floods while it reads is slowed, never closed), and only a send stalled for
``STALLED_SEND_S`` past the cap (the client reads nothing) says the connection cannot go on.
Checked by ``pytest tests/test_contexts.py tests/test_deepgram_flux.py -k "cap or burst"``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

# Judged by what the client does not read, not by what the writer has not had its turn to write: a burst of
# 5,000 answered frames from a client reading all along was closed after 2,606 replies
# (``tests/test_deepgram_flux.py::test_a_burst_of_answered_frames_from_a_client_that_reads_is_answered_whole``).
MAX_PENDING_REPLIES = 1024
STALLED_SEND_S = 2.0


@dataclass(frozen=True)
class Closing[F]:
    """The connection ends here: ``frame`` told first, then the close."""

    code: int = 1000
    reason: str = ""
    frame: F | None = None


@dataclass(frozen=True)
class DrainCheck:
    """Queued when a drain begins: the writer ends the connection once nothing is queued before it."""


@dataclass(frozen=True)
class Reply[F]:
    """A frame in answer order; a callable is made when its turn comes (a summary of the answers before it)."""

    frame: F | Callable[[], F | None]

    def made(self) -> F | None:
        return self.frame() if callable(self.frame) else self.frame


class Outbox[F, A]:
    """The connection's queue (``A``: its answers) and its notices, sent through ``send``."""

    def __init__(self, send: Callable[[F], Awaitable[None]]) -> None:
        self.queue: asyncio.Queue[A | Closing[F] | DrainCheck | Reply[F]] = asyncio.Queue()
        self._notices: asyncio.Queue[F] = asyncio.Queue()
        self._send = send
        self._sending = 0  # sends in flight (the writer's and the notices')
        self._sent = asyncio.Event()  # set by each frame that leaves

    def put(self, item: A | Closing[F] | DrainCheck | Reply[F]) -> None:
        self.queue.put_nowait(item)

    def notice(self, frame: F) -> None:
        """Sent now, not behind the answers queued."""
        self._notices.put_nowait(frame)

    async def deliver(self, frame: F) -> None:
        """Every frame leaves here: what ``room`` watches."""
        self._sending += 1
        try:
            await self._send(frame)
        finally:
            self._sending -= 1
        self._sent.set()

    async def deliver_notices(self) -> None:
        """The notices, as they come, until cancelled (or the transport fails)."""
        while True:
            await self.deliver(await self._notices.get())

    async def room(self) -> bool:
        """True once the replies waiting fit under the cap (at once, unless the client floods); False when
        they do not and a send has been stuck for ``STALLED_SEND_S``: the client reads nothing."""
        while self.queue.qsize() + self._notices.qsize() > MAX_PENDING_REPLIES:
            self._sent.clear()
            try:
                await asyncio.wait_for(self._sent.wait(), STALLED_SEND_S)
            except TimeoutError:
                if self._sending:
                    return False
        return True
