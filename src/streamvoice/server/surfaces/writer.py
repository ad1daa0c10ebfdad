"""A connection's writer (``surfaces.connection``): what its reader queued, answered in order, so audio never
interleaves and every answer gets exactly one ending; each answer's events rendered as the wire's frames, its
audio paced to the listener, its listener's turn taken at each piece's end; the answer finished on every path
(its seat told, the slot let go when none is left). Checked by ``pytest tests/test_connection.py`` and every
wire's tests."""

from __future__ import annotations

import logging
import time
from contextlib import aclosing
from typing import Protocol

from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.events import Completed, Failed, Marked, PieceEnded, PieceStarted
from streamvoice.server.core.piece_audio import Words
from streamvoice.server.core.seat import Seat
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.answer import Answer
from streamvoice.server.surfaces.outbox import Closing, DrainCheck, Outbox, Reply
from streamvoice.server.surfaces.playout import Playout
from streamvoice.server.surfaces.rendering import Sound, encoded_events
from streamvoice.server.surfaces.transport import Disconnected, Transport

log = logging.getLogger("streamvoice.connection")


class Written[F, A: Answer](Protocol):
    """What the writer reads of its connection (``connection.Connection``, which the writer cannot import:
    the connection runs it)."""

    name: str
    connection_id: str
    service: SpeechService
    transport: Transport[F]
    outbox: Outbox[F, A]
    playout: Playout[A]
    seat: Seat
    answering: list[A]

    def closing(self, code: ErrorCode, reason: str, message: str, close_code: int = 1000) -> Closing[F]: ...
    def render(
        self, answer: A, event: PieceStarted | Words | PieceEnded | Marked | Completed | Failed
    ) -> list[F]: ...
    def render_audio(self, answer: A, data: bytes, samples: int) -> list[F]: ...
    def render_failed(self, answer: A, error: ProtocolError) -> list[F]: ...
    def after_answer(self, answer: A) -> bool: ...
    def finished(self, answer: A) -> None: ...
    def handed_over(self, answer: A) -> F | None: ...
    def notice(self, frame: F | None) -> None: ...
    def cancel(self, target: str | None = None) -> list[A]: ...


class Writer[F, A: Answer]:
    """The one writer task of a connection."""

    def __init__(self, conn: Written[F, A]) -> None:
        self.conn = conn
        self.outbox = conn.outbox

    async def run(self) -> None:
        try:
            while True:
                item = await self.outbox.queue.get()
                if isinstance(item, Closing):
                    await self.conn.transport.close(item.code, item.reason, item.frame)
                    return
                if isinstance(item, DrainCheck):
                    if self.outbox.queue.empty():
                        message = "the server is shutting down; reconnect to go on"
                        done = self.conn.closing(ErrorCode.GOING_AWAY, "server shutting down", message, 1001)
                        await self.conn.transport.close(done.code, done.reason, done.frame)
                        return
                    self.outbox.put(item)  # answer what arrived first, then look again
                    continue
                if isinstance(item, Reply):
                    if (frame := item.made()) is not None:
                        await self.outbox.deliver(frame)
                    continue
                try:
                    await self._answer(item)
                except Disconnected:
                    raise
                except Exception as exc:  # a bug while answering: this answer fails, the connection goes on
                    log.error(
                        "%s=%s: answering failed: %s",
                        self.conn.name,
                        self.conn.connection_id,
                        type(exc).__name__,
                    )
                    item.utterance.cancel()
                    failed = ProtocolError(ErrorCode.SYNTHESIS_FAILED, "could not answer this message")
                    await self._send(self.conn.render_failed(item, failed))
                finally:
                    self._finish(item)
                if self.conn.after_answer(item):
                    await self.conn.transport.close(1000, "stream ended")
                    return
        except Disconnected:
            self.conn.cancel()

    def _finish(self, answer: A) -> None:
        self.conn.playout.finished(answer)
        self.conn.finished(answer)
        self.conn.seat.done(answer.utterance)
        if answer in self.conn.answering:
            self.conn.answering.remove(answer)
        if not self.conn.answering:
            self.conn.seat.idle()  # the slot goes unless the next answer comes

    async def _answer(self, answer: A) -> None:
        """The answer's events as the wire's frames, audio paced to the listener."""

        def first_audio() -> None:
            answer.first_audio_at = time.monotonic()
            self.conn.service.metrics.observe_first_audio(answer.first_audio_at - answer.opened_at)

        carried = 0  # samples whose audio the encoder still holds (MP3): they go with the next bytes
        async with aclosing(encoded_events(answer.utterance, answer.request, first_audio)) as events:
            async for event in events:
                if not isinstance(event, Sound):
                    await self._send(self.conn.render(answer, event))
                    if isinstance(event, PieceEnded):
                        await self._take_turns(answer)
                    continue
                await self.conn.transport.pace(event.samples)
                if answer.utterance.cancelled:
                    continue  # cut while waiting: none of it is sent (``cut`` counted what was)
                if not event.data:
                    carried += event.samples
                    continue
                frames = self.conn.render_audio(answer, event.data, event.samples + carried)
                self.conn.playout.sent(answer, event.samples + carried)
                carried = 0
                await self._send(frames)

    async def _take_turns(self, answer: A) -> None:
        """A listener's turn may be over at a piece's end (``Admission.take_turn``): its answer goes on
        when its slot comes back, or ends ``server_busy``."""
        try:
            await self.conn.seat.take_turn(lambda: self.conn.notice(self.conn.handed_over(answer)))
        except ProtocolError as exc:
            answer.utterance.fail(exc.naming(id=answer.id))

    async def _send(self, frames: list[F]) -> None:
        for frame in frames:
            await self.outbox.deliver(frame)
