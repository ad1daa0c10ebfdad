"""How a connection's frames travel, as the runtime (``connection``) sees it: a transport (a WebSocket's,
``websocket.WebSocketTransport``, or Wyoming's TCP stream) and the reader / writer pair every connection
runs on it. Checked by ``pytest tests/test_connection.py``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

CLOSE_WAIT_S = 1.0  # how long an aborted connection waits for its close frame to be taken


class Disconnected(Exception):
    """The client is gone (or was closed for not reading): nothing more can reach it."""


class Transport[F](Protocol):
    """How a connection's frames travel: a WebSocket (``websocket.WebSocketTransport``) or Wyoming's TCP."""

    on_stalled: Callable[[], object]  # the client stopped reading: the connection stops the work made for it

    async def receive(self) -> F | None:
        """The next frame; None when the client went away."""
        ...

    async def send(self, frame: F) -> None:
        """Bounded by the send timeout; ``Disconnected`` when the frame cannot reach the client."""
        ...

    async def pace(self, samples: int) -> None:
        """Wait until ``samples`` more of audio may leave (never far ahead of the listener's playback)."""
        ...

    def restart_playout(self) -> None:
        """What was sent will not be played (barge-in): the listener's playback starts again now."""
        ...

    def unplayed_s(self) -> float:
        """Seconds of the audio sent that the listener has not played yet, if it plays as it arrives."""
        ...

    async def close(self, code: int, reason: str, last: F | None = None) -> None:
        """Send ``last`` if the client is still there, then close."""
        ...


async def run_reader_and_writer(
    read: Coroutine[Any, Any, None],
    write: Coroutine[Any, Any, None],
    transport: Transport[Any],
    aborted: Callable[[], tuple[int, str] | None],
) -> None:
    """A connection's reader and writer until one ends.

    The reader ends by queueing a close, and the writer answers what was queued before it, then closes;
    except when the reader gave up on the client (``aborted``: the replies it cannot take passed the cap):
    nothing queued can reach it, so the connection closes now. Waiting for the writer kept the listener
    slot behind an open answer after the client had gone (``tests/test_connection.py``).
    """
    reader = asyncio.ensure_future(read)
    writer = asyncio.ensure_future(write)
    try:
        done, _ = await asyncio.wait({reader, writer}, return_when=asyncio.FIRST_COMPLETED)
        if writer in done:
            reader.cancel()
        elif (why := aborted()) is not None:
            writer.cancel()
            with contextlib.suppress(TimeoutError):  # a client that reads nothing may never take the close
                await asyncio.wait_for(transport.close(*why), CLOSE_WAIT_S)
        else:
            await writer
    finally:
        for task in (reader, writer):
            task.cancel()
        await asyncio.gather(reader, writer, return_exceptions=True)
