"""One bidirectional speech session: many messages in, audio and control frames out, strictly in order.

Two tasks per session. The reader parses frames as they arrive and queues one outcome per message (a
synthesis job or an error) in an ordered outbox; a job's model calls are queued on the scheduler at once,
so piece N+1 is synthesised while piece N is on the wire. The writer drains the outbox in order, so every
message gets exactly one ``synthesis_complete`` or one ``error``, and audio never interleaves across
messages. A bad frame only produces an error frame; the session goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from streamvoice.audio.encoders import make_encoder
from streamvoice.engine.kokoro import Piece
from streamvoice.protocol import (
    Ack,
    Cancel,
    Close,
    Configure,
    ErrorCode,
    ErrorEvent,
    ProtocolError,
    ServerEvent,
    SynthesisComplete,
    SynthesisStarted,
    Synthesize,
    decode_client_frame,
    encode_event,
)
from streamvoice.server.service import (
    Lane,
    PieceAudio,
    ResolvedRequest,
    SessionDefaults,
    SpeechService,
)

log = logging.getLogger("streamvoice.session")

AUDIO_FRAME_BYTES = 32 * 1024


@dataclass(eq=False)
class _Job:
    sequence: int
    id: str | None
    request: ResolvedRequest
    received_at: float
    plan: asyncio.Task[list[PieceAudio]] | None = None
    streams: list[PieceAudio] = field(default_factory=list)
    cancelled: bool = False
    answered: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(frozen=True)
class _Reply:
    event: ServerEvent


@dataclass(frozen=True)
class _End:
    code: int = 1000
    reason: str = ""
    event: ServerEvent | None = None


class _Disconnected(Exception):
    pass


class BidiSession:
    def __init__(self, ws: WebSocket, service: SpeechService, session_id: str) -> None:
        self.ws = ws
        self.service = service
        self.session_id = session_id
        self.defaults = SessionDefaults()
        self.lane: Lane = service.lane()
        self._outbox: asyncio.Queue[_Job | _Reply | _End] = asyncio.Queue()
        self._open: list[_Job] = []  # accepted, not yet answered
        self._sequence = 0
        self._last_plan: asyncio.Task[Any] | None = None
        self._last_job: _Job | None = None
        self._started = time.monotonic()
        self._send_lock = asyncio.Lock()

    def drain(self) -> None:
        """Finish queued messages, then close with 1001 (going away)."""
        self._outbox.put_nowait(
            _End(
                1001,
                "server shutting down",
                ErrorEvent(ErrorCode.GOING_AWAY, "the server is shutting down; reconnect to go on"),
            )
        )

    async def run(self) -> None:
        self.service.sessions.add(self)
        try:
            await self._run()
        finally:
            self.service.sessions.discard(self)

    async def _run(self) -> None:
        reader = asyncio.create_task(self._read_loop(), name=f"read-{self.session_id}")
        writer = asyncio.create_task(self._write_loop(), name=f"write-{self.session_id}")
        try:
            done, _ = await asyncio.wait({reader, writer}, return_when=asyncio.FIRST_COMPLETED)
            if writer in done:
                reader.cancel()
            else:
                # The reader ended (close requested, or the client went away). A close waits for the
                # writer to answer everything queued; a disconnect has already cancelled the work.
                await writer
        finally:
            for task in (reader, writer):
                task.cancel()
            self._cancel_all()
            await asyncio.gather(reader, writer, return_exceptions=True)

    # -- reading ------------------------------------------------------------------------------------
    async def _read_loop(self) -> None:
        cfg = self.service.config
        while True:
            # Backpressure: while replies pile up unsent (a slow reader), stop reading its input, so TCP
            # flow control pushes back on the client instead of our memory growing.
            while self._outbox.qsize() >= cfg.max_queued_messages:
                await asyncio.sleep(0.05)
            try:
                message = await asyncio.wait_for(self.ws.receive(), timeout=cfg.idle_timeout_s)
            except TimeoutError:
                if self._open:
                    continue
                await self._outbox.put(
                    _End(
                        1000,
                        "idle timeout",
                        ErrorEvent(
                            ErrorCode.IDLE_TIMEOUT, f"no message for {cfg.idle_timeout_s:g} s; session closed"
                        ),
                    )
                )
                return
            if message["type"] == "websocket.disconnect":
                self._cancel_all()
                await self._outbox.put(_End(1000, "client went away"))
                return
            data = message.get("text")
            if data is None:
                data = message.get("bytes") or b""
            if time.monotonic() - self._started > cfg.session_lifetime_s:
                await self._outbox.put(
                    _End(
                        1000,
                        "session lifetime reached",
                        ErrorEvent(
                            ErrorCode.SESSION_EXPIRED,
                            f"sessions last at most {cfg.session_lifetime_s:g} s; open a new session to go on",
                        ),
                    )
                )
                return
            if await self._handle_frame(data):
                return

    async def _handle_frame(self, data: str | bytes) -> bool:
        """Returns True when the session should stop reading (a close)."""
        try:
            msg = decode_client_frame(data, self.service.config.limits)
        except ProtocolError as exc:
            await self._reply_error(exc, self._next_sequence())
            return False
        match msg:
            case Synthesize():
                await self._accept(msg)
            case Configure():
                await self._configure(msg)
            case Cancel():
                ids = self._cancel_all()
                await self._outbox.put(_Reply(Ack("cancelled", {"ids": ids, "count": len(ids)})))
            case Close():
                await self._outbox.put(
                    _End(1000, "client closed", Ack("session_closed", {"session": self.session_id}))
                )
                return True
        return False

    def _next_sequence(self) -> int:
        seq = self._sequence
        self._sequence += 1
        return seq

    async def _reply_error(self, exc: ProtocolError, sequence: int | None) -> None:
        self.service.metrics.count_error(str(exc.code))
        await self._outbox.put(_Reply(ErrorEvent(str(exc.code), exc.message, exc.id, sequence)))

    async def _accept(self, msg: Synthesize) -> None:
        sequence = self._next_sequence()
        if len(self._open) >= self.service.config.max_queued_messages:
            await self._reply_error(
                ProtocolError(
                    ErrorCode.QUEUE_FULL,
                    f"{len(self._open)} messages are already waiting in this session (limit "
                    f"{self.service.config.max_queued_messages}); wait for a synthesis_complete and resend",
                    msg.id,
                ),
                sequence,
            )
            return
        try:
            request = self.service.resolve(
                msg.text, self.defaults, msg.voice, msg.speed, msg.format, msg.lang, msg.id
            )
        except ProtocolError as exc:
            await self._reply_error(exc, sequence)
            return
        job = _Job(sequence, msg.id, request, time.monotonic())
        job.plan = asyncio.create_task(self._plan_and_submit(job, self._last_plan, self._last_job))
        self._last_plan = job.plan
        self._last_job = job
        self._open.append(job)
        self.service.metrics.count_message()
        await self._outbox.put(job)

    async def _plan_and_submit(
        self, job: _Job, previous: asyncio.Task[Any] | None, previous_job: _Job | None
    ) -> list[PieceAudio]:
        pieces: list[Piece] = await self.service.plan(job.request)
        if previous is not None:
            # Submit in message order so deadlines follow speaking order.
            await asyncio.wait({previous})
        if previous_job is not None and not self.service.config.pipeline:
            # The reference design, kept as a benchmark baseline: nothing starts until the last answer left.
            await previous_job.answered.wait()
        if job.cancelled:
            raise asyncio.CancelledError
        job.streams = self.service.submit(pieces, job.request, self.lane)
        return job.streams

    async def _configure(self, msg: Configure) -> None:
        changes: dict[str, Any] = {
            k: v
            for k, v in (
                ("voice", msg.voice),
                ("speed", msg.speed),
                ("format", msg.format),
                ("lang", msg.lang),
            )
            if v is not None
        }
        candidate = replace(self.defaults, **changes)
        try:
            self.service.resolve("x", candidate)
        except ProtocolError as exc:
            await self._reply_error(exc, None)
            return
        self.defaults = candidate
        await self._outbox.put(
            _Reply(
                Ack(
                    "configured",
                    {
                        "voice": candidate.voice,
                        "speed": candidate.speed,
                        "format": candidate.format,
                        "lang": candidate.lang,
                    },
                )
            )
        )

    def _cancel_all(self) -> list[str | None]:
        ids = []
        for job in self._open:
            job.cancelled = True
            if job.plan is not None:
                job.plan.cancel()
            for stream in job.streams:
                stream.cancel()
            ids.append(job.id)
        return ids

    # -- writing ------------------------------------------------------------------------------------
    async def _write_loop(self) -> None:
        try:
            while True:
                item = await self._outbox.get()
                if isinstance(item, _End):
                    await self._end(item)
                    return
                if isinstance(item, _Reply):
                    await self._send_event(item.event)
                    continue
                try:
                    await self._run_job(item)
                finally:
                    item.answered.set()
                    if item in self._open:
                        self._open.remove(item)
        except _Disconnected:
            self._cancel_all()

    async def _run_job(self, job: _Job) -> None:
        metrics = self.service.metrics
        streams: list[PieceAudio] = []
        if not job.cancelled and job.plan is not None:
            await asyncio.wait({job.plan})
            if not job.plan.cancelled():
                exc = job.plan.exception()
                if isinstance(exc, ProtocolError):
                    await self._send_error(job, exc.code, exc.message)
                    return
                if exc is not None:
                    log.exception(
                        "planning failed session=%s seq=%d", self.session_id, job.sequence, exc_info=exc
                    )
                    await self._send_error(
                        job, ErrorCode.SYNTHESIS_FAILED, "could not prepare the text for synthesis"
                    )
                    return
                streams = job.plan.result()
        if job.cancelled:
            await self._send_error(job, ErrorCode.CANCELLED, "cancelled before it finished")
            return
        encoder = make_encoder(job.request.format)
        await self._send_event(SynthesisStarted(job.id, job.sequence, job.request.format))
        sent = samples = 0
        for stream in streams:
            try:
                async for audio in stream.windows():
                    if job.cancelled:
                        raise asyncio.CancelledError
                    data = encoder.encode(audio)
                    if sent == 0 and data:
                        metrics.observe_first_audio(time.monotonic() - job.received_at)
                    sent += await self._send_audio(data)
                    samples += audio.size
            except asyncio.CancelledError:
                if not job.cancelled:
                    raise  # the session itself is shutting down
                await self._send_error(job, ErrorCode.CANCELLED, "cancelled before it finished")
                return
            except _Disconnected:
                raise
            except Exception as exc:
                log.error("model call failed session=%s seq=%d: %r", self.session_id, job.sequence, exc)
                for rest in streams:
                    rest.cancel()
                await self._send_error(
                    job,
                    ErrorCode.SYNTHESIS_FAILED,
                    "the speech model failed on this message; later messages are unaffected",
                )
                return
        sent += await self._send_audio(encoder.flush())
        audio_ms = round(samples * 1000 / self.service.engine.sample_rate, 1)
        await self._send_event(SynthesisComplete(job.id, job.sequence, audio_ms, sent, len(streams)))

    async def _send_error(self, job: _Job, code: ErrorCode | str, message: str) -> None:
        self.service.metrics.count_error(str(code))
        await self._send_event(ErrorEvent(str(code), message, job.id, job.sequence))

    async def _send_audio(self, data: bytes) -> int:
        for start in range(0, len(data), AUDIO_FRAME_BYTES):
            await self._send(data[start : start + AUDIO_FRAME_BYTES])
        return len(data)

    async def _send_event(self, event: ServerEvent) -> None:
        await self._send(encode_event(event))

    async def _send(self, data: str | bytes) -> None:
        if self.ws.application_state != WebSocketState.CONNECTED:
            raise _Disconnected
        send = self.ws.send_text(data) if isinstance(data, str) else self.ws.send_bytes(data)
        try:
            # A client that stops reading fills the socket buffer and blocks this send; waiting forever
            # would pin the session's audio in memory. Give up after a bound and say why.
            await asyncio.wait_for(send, timeout=self.service.config.send_timeout_s)
        except TimeoutError:
            log.warning("session=%s: client stopped reading for %.0f s; closing", self.session_id,
                        self.service.config.send_timeout_s)  # fmt: skip
            self.service.metrics.count_error("slow_consumer")
            self._cancel_all()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.ws.close(1008, "client stopped reading audio"), timeout=2)
            raise _Disconnected from None
        except (WebSocketDisconnect, RuntimeError, OSError) as exc:
            raise _Disconnected from exc

    async def _end(self, item: _End) -> None:
        with contextlib.suppress(_Disconnected):
            if item.event is not None:
                await self._send_event(item.event)
        with contextlib.suppress(RuntimeError, OSError):
            if self.ws.application_state == WebSocketState.CONNECTED:
                await self.ws.close(item.code, item.reason)
