"""What a WebSocket surface sends: frames in order, audio paced to the listener, every send bounded.

Shared by every WebSocket adapter (the session protocol and the vendor protocols), so that a client
that stops reading is closed the same way everywhere (1008 after ``send_timeout_s`` without progress) and
no surface sends audio more than ``max_send_ahead_s`` ahead of its listener's playback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from streamvoice.server.metrics import Metrics

log = logging.getLogger("streamvoice.session")

AUDIO_FRAME_BYTES = 32 * 1024
CLOSE_WAIT_S = 1.0  # how long an aborted connection waits for its close frame to be taken


class Disconnected(Exception):
    """The client is gone (or was closed for not reading): nothing more can reach it."""


class WebSocketOutput:
    def __init__(
        self,
        ws: WebSocket,
        metrics: Metrics,
        sample_rate: int,
        send_timeout_s: float,
        max_send_ahead_s: float,
        on_stalled: Callable[[], object],
        name: str = "",
    ) -> None:
        self.ws = ws
        self._metrics = metrics
        self._rate = sample_rate
        self._timeout_s = send_timeout_s
        self._ahead_s = max_send_ahead_s
        self._on_stalled = on_stalled  # the client stopped reading: stop the work made for it
        self._name = name
        # When the audio sent so far will have played out at the listener, if playback started on arrival.
        self._playout_end = 0.0

    def restart_playout(self) -> None:
        """What was sent will not be played (barge-in): the listener's playback starts again now."""
        self._playout_end = time.monotonic()

    async def pace(self, samples: int) -> None:
        """Wait until ``samples`` more of audio may leave: never more than ``max_send_ahead_s`` ahead of the
        listener's playback (a wire that wraps audio in its own frames sends them after this).

        Whatever is sent sits in socket buffers in front of the server's keepalive pings; a listener that
        reads at playback speed would otherwise fall further behind every second until a ping times out.
        """
        now = time.monotonic()
        ahead = self._playout_end - now - self._ahead_s
        if ahead > 0:
            await asyncio.sleep(ahead)
            now = time.monotonic()
        self._playout_end = max(self._playout_end, now) + samples / self._rate

    async def audio(self, data: bytes, samples: int) -> int:
        """Send encoded audio as binary frames, paced (``pace``)."""
        await self.pace(samples)
        for start in range(0, len(data), AUDIO_FRAME_BYTES):
            await self.send(data[start : start + AUDIO_FRAME_BYTES])
        return len(data)

    async def send(self, data: str | bytes) -> None:
        if self.ws.application_state != WebSocketState.CONNECTED:
            raise Disconnected
        send = self.ws.send_text(data) if isinstance(data, str) else self.ws.send_bytes(data)
        try:
            # A client that stops reading fills the socket buffer and blocks this send; waiting forever
            # would pin its audio in memory. No progress at all for this long: give up and say why.
            await asyncio.wait_for(send, timeout=self._timeout_s)
        except TimeoutError:
            log.warning("%s: client stopped reading for %.0f s; closing", self._name, self._timeout_s)
            self._metrics.count_error("slow_consumer")
            self._on_stalled()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.ws.close(1008, "client stopped reading audio"), timeout=2)
            raise Disconnected from None
        except (WebSocketDisconnect, RuntimeError, OSError) as exc:
            raise Disconnected from exc

    async def close(self, code: int, reason: str, last: str | bytes | None = None) -> None:
        """Send ``last`` (if the client is still there) and close."""
        with contextlib.suppress(Disconnected):
            if last is not None:
                await self.send(last)
        with contextlib.suppress(RuntimeError, OSError):
            if self.ws.application_state == WebSocketState.CONNECTED:
                await self.ws.close(code, reason)


async def run_reader_and_writer(
    read: Coroutine[Any, Any, None],
    write: Coroutine[Any, Any, None],
    output: WebSocketOutput,
    aborted: Callable[[], tuple[int, str] | None],
) -> None:
    """A connection's reader and writer until one ends (the session protocol and the vendor sockets).

    The reader ends by queueing a close, and the writer answers what was queued before it, then closes;
    except when the reader gave up on the client (``aborted``: the replies it cannot take passed the cap):
    nothing queued can reach it, so the connection closes now. Waiting for the writer kept the listener
    slot behind an open answer after the client had gone (``tests/test_vendor_socket.py``).
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
                await asyncio.wait_for(output.close(*why), CLOSE_WAIT_S)
        else:
            await writer
    finally:
        for task in (reader, writer):
            task.cancel()
        await asyncio.gather(reader, writer, return_exceptions=True)
