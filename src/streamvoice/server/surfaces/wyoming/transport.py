"""Wyoming events over a TCP (or unix) stream, as the connection runtime's transport: read by
``wire.read_event`` (every length checked), every write bounded by the send timeout, no pacing (Home
Assistant buffers what it is sent, as wyoming-piper's clients do). Checked by ``pytest tests/test_wyoming.py``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from wyoming.event import Event, async_write_event

from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.transport import Disconnected
from streamvoice.server.surfaces.wyoming.wire import WireError, WireLimits, read_event

log = logging.getLogger("streamvoice.wyoming")

Frame = Event | WireError  # what the transport reads: an event, or why the bytes were not one


class TcpTransport:
    """Wyoming events over a TCP (or unix) stream: read by ``wire.read_event``, every write bounded by the
    send timeout; no pacing (Home Assistant buffers what it is sent, as wyoming-piper's clients do)."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, service: SpeechService
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.service = service
        self.on_stalled: Callable[[], object] = lambda: None
        self.linger = False  # close after a stream that cannot be framed: discard what is still coming
        self._limits = WireLimits(max_data_bytes=service.config.max_message_bytes)
        self._reading: asyncio.Future[Event | None] | None = None

    async def receive(self) -> Frame | None:
        # One read at a time, kept across the runtime's idle timeout: cancelling a read between an event's
        # header and its data would lose the stream's framing.
        if self._reading is None:
            self._reading = asyncio.ensure_future(read_event(self.reader, self._limits))
        try:
            return await asyncio.shield(self._reading)
        except WireError as exc:
            return exc
        except (ConnectionError, OSError):
            return None
        finally:
            if self._reading.done():
                self._reading = None

    async def send(self, frame: Frame) -> None:
        if isinstance(frame, WireError) or self.writer.is_closing():
            raise Disconnected
        try:
            async with asyncio.timeout(self.service.config.send_timeout_s):
                await async_write_event(frame, self.writer)
        except TimeoutError:
            self.service.metrics.count_error("slow_consumer")
            log.warning(
                "wyoming: client stopped reading for %.0f s; closing", self.service.config.send_timeout_s
            )
            self.on_stalled()
            self.writer.transport.abort()
            raise Disconnected from None
        except (ConnectionError, OSError, RuntimeError) as exc:
            raise Disconnected from exc

    async def pace(self, samples: int) -> None:
        return None

    def unplayed_s(self) -> float:
        return 0.0  # Wyoming's satellites play what they are sent; its wire cannot interrupt

    def restart_playout(self) -> None:
        return None

    async def close(self, code: int, reason: str, last: Frame | None = None) -> None:
        if last is not None:
            with contextlib.suppress(Disconnected):
                await self.send(last)
        if self.linger:
            await self._linger()
        if self._reading is not None:
            self._reading.cancel()
        self.writer.close()

    async def _linger(self, max_bytes: int = 16 << 20, max_s: float = 1.0) -> None:
        """Before closing on a stream that cannot be framed: stop writing and discard what the client is
        still sending, within bounds, so the error just sent is not lost to a reset (closing a socket with
        unread bytes resets it, and the peer may drop what it had not read yet)."""
        with contextlib.suppress(OSError, RuntimeError, TimeoutError):
            if self.writer.can_write_eof():
                self.writer.write_eof()
            async with asyncio.timeout(max_s):
                discarded = 0
                while discarded < max_bytes and (chunk := await self.reader.read(65536)):
                    discarded += len(chunk)
