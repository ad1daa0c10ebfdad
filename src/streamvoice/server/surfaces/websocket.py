"""A connection's frames over a WebSocket: received as text or bytes, sent in order, audio paced to the
listener, every send bounded.

The transport of every WebSocket wire (the session protocol and the vendor protocols, through
``connection.Connection``), so that a client that stops reading is closed the same way everywhere (1008
after ``send_timeout_s`` without progress) and no wire sends audio more than ``max_send_ahead_s`` ahead
of its listener's playback. Checked by ``pytest tests/test_websocket.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from starlette.types import Message
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from streamvoice.server.core.metrics import Metrics
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.transport import Disconnected

log = logging.getLogger("streamvoice.connection")

AUDIO_FRAME_BYTES = 32 * 1024


def frame_of(message: Message) -> str | bytes | None:
    """An ASGI WebSocket message as a frame, text or bytes; None when the client went away."""
    if message["type"] == "websocket.disconnect":
        return None
    text = message.get("text")
    return text if text is not None else (message.get("bytes") or b"")


def audio_frames(data: bytes) -> list[bytes]:
    """Encoded audio as binary frames of at most ``AUDIO_FRAME_BYTES``."""
    return [data[i : i + AUDIO_FRAME_BYTES] for i in range(0, len(data), AUDIO_FRAME_BYTES)]


class WebSocketTransport:
    def __init__(
        self,
        ws: WebSocket,
        metrics: Metrics,
        sample_rate: int,
        send_timeout_s: float,
        max_send_ahead_s: float,
        on_stalled: Callable[[], object] = lambda: None,
        name: str = "",
    ) -> None:
        self.ws = ws
        self._metrics = metrics
        self._rate = sample_rate
        self._timeout_s = send_timeout_s
        self._ahead_s = max_send_ahead_s
        self.on_stalled = on_stalled  # the client stopped reading: stop the work made for it
        self._name = name
        # When the audio sent so far will have played out at the listener, if playback started on arrival.
        self._playout_end = 0.0

    @classmethod
    def of(cls, ws: WebSocket, service: SpeechService, name: str) -> WebSocketTransport:
        """With the server's send timeout and send-ahead."""
        config = service.config
        return cls(
            ws,
            service.metrics,
            service.sample_rate,
            config.send_timeout_s,
            config.max_send_ahead_s,
            name=name,
        )

    def restart_playout(self) -> None:
        """What was sent will not be played (barge-in): the listener's playback starts again now."""
        self._playout_end = time.monotonic()

    def unplayed_s(self) -> float:
        return max(0.0, self._playout_end - time.monotonic())

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

    async def receive(self) -> str | bytes | None:
        """The next frame, text or bytes; None when the client went away."""
        return frame_of(await self.ws.receive())

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
            self.on_stalled()
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
