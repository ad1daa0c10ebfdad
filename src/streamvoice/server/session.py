"""One bidirectional speech session: many messages in, audio and control frames out, strictly in order.

Two tasks per session. The reader parses frames as they arrive and queues one outcome per message (a
synthesis job or an error) in an ordered outbox; a job's pieces are planned chunk by chunk and each goes to
the scheduler as soon as it is planned, so piece N+1 is synthesised while piece N is on the wire. The
writer drains the outbox in order, so every message gets exactly one ``synthesis_complete`` or one
``error``, and audio never interleaves across messages.

The reader never stops reading: a client's keepalive pongs travel behind its data frames, so a reader that
paused would get a busy client disconnected. Excess messages are answered ``queue_full`` instead. Anything
that goes wrong with one frame becomes an ``error`` frame and the session goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from streamvoice.audio.output import AudioOutput
from streamvoice.engine.alignment import as_json, shift
from streamvoice.protocol import (
    Ack,
    Alignment,
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
from streamvoice.server.lane import Lane
from streamvoice.server.piece_audio import PieceAudio, Words
from streamvoice.server.service import ResolvedRequest, SessionDefaults, SpeechService

log = logging.getLogger("streamvoice.session")

AUDIO_FRAME_BYTES = 32 * 1024
# Replies waiting to be sent beyond which a client that sends frames but reads nothing is closed (1008):
# the reader keeps reading, so this, not TCP, bounds what such a client can make the server hold.
MAX_PENDING_REPLIES = 1024


class JobState(enum.Enum):
    QUEUED = "queued"  # accepted; planning and synthesis may already run
    STARTED = "started"  # synthesis_started sent
    STREAMING = "streaming"  # audio sent
    DONE = "done"  # synthesis_complete sent
    FAILED = "failed"  # error sent
    CANCELLED = "cancelled"  # cancel or disconnect; answered ``cancelled`` if the client is still there


# The only moves a message makes; every change of state goes through ``_Job.advance``.
_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.QUEUED: frozenset({JobState.STARTED, JobState.FAILED, JobState.CANCELLED}),
    JobState.STARTED: frozenset({JobState.STREAMING, JobState.DONE, JobState.FAILED, JobState.CANCELLED}),
    JobState.STREAMING: frozenset({JobState.DONE, JobState.FAILED, JobState.CANCELLED}),
}


@dataclass(eq=False)
class _Job:
    sequence: int
    id: str | None
    request: ResolvedRequest
    received_at: float
    state: JobState = JobState.QUEUED
    plan: asyncio.Task[None] | None = None
    # Pieces' audio as planning submits them, then ``None``: the writer's end-of-plan marker.
    ready: asyncio.Queue[PieceAudio | None] = field(default_factory=asyncio.Queue)
    streams: list[PieceAudio] = field(default_factory=list)
    answered: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def cancelled(self) -> bool:
        return self.state is JobState.CANCELLED

    def advance(self, to: JobState) -> bool:
        """Move to ``to`` if that is a legal move from here; a finished message never changes again."""
        if to not in _TRANSITIONS.get(self.state, frozenset()):
            return False
        self.state = to
        if to in (JobState.FAILED, JobState.CANCELLED):  # stop whatever still works for this message
            if self.plan is not None:
                self.plan.cancel()
            for stream in self.streams:
                stream.cancel()
        return True

    def cancel(self) -> None:
        self.advance(JobState.CANCELLED)


@dataclass(frozen=True)
class _Reply:
    event: ServerEvent


@dataclass(frozen=True)
class _End:
    code: int = 1000
    reason: str = ""
    event: ServerEvent | None = None


@dataclass(frozen=True)
class _DrainCheck:
    """Queued when a drain begins: the writer ends the session once nothing is queued behind it."""


class _Disconnected(Exception):
    pass


class BidiSession:
    def __init__(self, ws: WebSocket, service: SpeechService, session_id: str) -> None:
        self.ws = ws
        self.service = service
        self.session_id = session_id
        self.defaults = SessionDefaults()
        self.lane: Lane = service.lane()
        self._outbox: asyncio.Queue[_Job | _Reply | _End | _DrainCheck] = asyncio.Queue()
        self._open: list[_Job] = []  # accepted, not yet answered
        self._sequence = 0
        self._last_job: _Job | None = None
        self._started = time.monotonic()
        self._draining = False
        # When the audio sent so far will have played out at the listener, if playback started on arrival.
        self._playout_end = 0.0

    @property
    def busy(self) -> bool:
        """A message is queued or in flight (what an autoscaler counts; an idle open session is cheap)."""
        return bool(self._open)

    def drain(self) -> None:
        """Finish queued messages, answer later ones ``going_away``, then close with 1001."""
        if not self._draining:
            self._draining = True
            self._outbox.put_nowait(_DrainCheck())

    async def run(self) -> None:
        self.service.sessions.add(self)
        try:
            await self._run()
        finally:
            self.service.sessions.discard(self)
            self.service.admission.leave(self)

    async def _run(self) -> None:
        reader = asyncio.create_task(self._read_guarded(), name=f"read-{self.session_id}")
        writer = asyncio.create_task(self._write_loop(), name=f"write-{self.session_id}")
        try:
            done, _ = await asyncio.wait({reader, writer}, return_when=asyncio.FIRST_COMPLETED)
            if writer in done:
                reader.cancel()
            else:
                # The reader ended (close requested, the client went away, or a limit): it always queues
                # an _End, so the writer answers everything queued before it and then closes.
                await writer
        finally:
            for task in (reader, writer):
                task.cancel()
            self._cancel_all()
            await asyncio.gather(reader, writer, return_exceptions=True)

    # -- reading ------------------------------------------------------------------------------------
    async def _read_guarded(self) -> None:
        try:
            await self._read_loop()
        except Exception:
            # A bug in the reader must not leave the writer waiting forever and the session's slot taken.
            log.exception("session=%s: reader failed; closing the session", self.session_id)
            await self._outbox.put(
                _End(1011, "internal error", ErrorEvent(ErrorCode.INTERNAL, "the session failed; reconnect"))
            )

    async def _read_loop(self) -> None:
        cfg = self.service.config
        while True:
            lifetime_left = cfg.session_lifetime_s - (time.monotonic() - self._started)
            if lifetime_left <= 0:
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
            try:
                message = await asyncio.wait_for(
                    self.ws.receive(), timeout=min(cfg.idle_timeout_s, lifetime_left)
                )
            except TimeoutError:
                if self._open or time.monotonic() - self._started >= cfg.session_lifetime_s:
                    continue  # busy, or the lifetime check above ends the session
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
            if self._outbox.qsize() > MAX_PENDING_REPLIES:
                self.service.metrics.count_error("too_many_pending")
                await self._outbox.put(
                    _End(1008, "too many unanswered frames", None)
                )  # the client reads nothing: no answer can reach it, so none is queued
                return
            data = message.get("text")
            if data is None:
                data = message.get("bytes") or b""
            try:
                if await self._handle_frame(data):
                    return
            except Exception:
                log.exception("session=%s: frame handling failed", self.session_id)
                await self._reply_error(
                    ProtocolError(ErrorCode.INTERNAL, "the server could not handle this message"),
                    self._next_sequence(),
                )

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
            case Cancel(id=target):
                # No id: everything open (barge-in); an id: that message only, the rest goes on.
                ids = self._cancel(
                    [j for j in self._open if target is None or (j.id == target and not j.cancelled)]
                )
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
        limit = self.service.config.max_queued_messages
        if self._draining:
            await self._reply_error(
                ProtocolError(
                    ErrorCode.GOING_AWAY,
                    "the server is shutting down; send this message again on a new session",
                    msg.id,
                ),
                sequence,
            )
            return
        if len(self._open) >= limit:
            await self._reply_error(
                ProtocolError(
                    ErrorCode.QUEUE_FULL,
                    f"{len(self._open)} messages are already waiting in this session (limit {limit}); "
                    "wait for a synthesis_complete and resend",
                    msg.id,
                ),
                sequence,
            )
            return
        try:
            request = self.service.resolve_message(msg, self.defaults)
        except ProtocolError as exc:
            await self._reply_error(exc, sequence)
            return
        if not await self._admit(msg.id, sequence):
            return
        job = _Job(sequence, msg.id, request, time.monotonic())
        job.plan = asyncio.create_task(self._plan_and_submit(job, self._last_job))
        ready = job.ready
        job.plan.add_done_callback(lambda _: ready.put_nowait(None))  # runs even if cancelled unstarted
        self._last_job = job
        self._open.append(job)
        self.service.metrics.count_message()
        await self._outbox.put(job)

    async def _admit(self, msg_id: str | None, sequence: int) -> bool:
        """A listener slot for this session: held, taken, waited for (told now), or refused (told now)."""
        admission = self.service.admission
        decision = admission.enter(self)
        if decision == "refused":
            busy = admission.busy("no listener slot is free")
            busy.id = msg_id
            await self._reply_error(busy, sequence)
            return False
        if decision == "queued":
            position = admission.position(self)
            detail = {
                "id": msg_id,
                "sequence": sequence,
                "position": position,
                "max_wait_s": admission.max_wait_s,
            }
            await self._outbox.put(_Reply(Ack("queued", detail)))
        return True

    async def _plan_and_submit(self, job: _Job, previous: _Job | None) -> None:
        if previous is not None and previous.plan is not None:
            # One planner per session, in message order, so deadlines follow speaking order and a client
            # cannot occupy the planning thread with many messages at once.
            await asyncio.wait({previous.plan})
        if previous is not None and not self.service.config.pipeline:
            # The reference design, kept as a benchmark baseline: nothing starts until the last answer left.
            await previous.answered.wait()
        admission = self.service.admission
        await admission.wait(self)  # server_busy (answered for this message) if no slot frees in time
        if not admission.holds(self):
            raise admission.busy("this session's wait for a listener slot ran out")
        await self.service.plan_into(job.request, self.lane, job.streams, job.ready)

    async def _configure(self, msg: Configure) -> None:
        changes: dict[str, Any] = {
            k: v
            for k, v in (
                ("voice", msg.voice),
                ("speed", msg.speed),
                ("format", msg.format),
                ("lang", msg.lang),
                ("sample_rate", msg.sample_rate),
            )
            if v is not None
        }
        if msg.pauses is not None:
            changes["pauses"] = replace(self.defaults.pauses or self.service.config.pauses, **msg.pauses)
        if msg.lexicon is not None:
            changes["lexicon"] = msg.lexicon
        candidate = replace(self.defaults, **changes)
        try:
            self.service.resolve("x", candidate)
        except ProtocolError as exc:
            await self._reply_error(exc, None)
            return
        self.defaults = candidate
        pauses = candidate.pauses or self.service.config.pauses
        await self._outbox.put(
            _Reply(
                Ack(
                    "configured",
                    {
                        "voice": candidate.voice,
                        "speed": candidate.speed,
                        "format": candidate.format,
                        "lang": candidate.lang,
                        "sample_rate": candidate.sample_rate,
                        "pauses": asdict(pauses),
                        "lexicon_entries": len(candidate.lexicon),
                    },
                )
            )
        )

    def _cancel_all(self) -> list[str | None]:
        return self._cancel(list(self._open))

    def _cancel(self, jobs: list[_Job]) -> list[str | None]:
        """Cancel these open messages; their ids.

        Only when the message being spoken is among them does the listener's playback restart (what is
        queued after it was not playing yet).
        """
        if jobs and self._open[0] in jobs:
            self.lane.restart_playback()
            self._playout_end = time.monotonic()
        for job in jobs:
            job.cancel()
        return [job.id for job in jobs]

    # -- writing ------------------------------------------------------------------------------------
    async def _write_loop(self) -> None:
        try:
            while True:
                item = await self._outbox.get()
                if isinstance(item, _End):
                    await self._end(item)
                    return
                if isinstance(item, _DrainCheck):
                    if self._outbox.empty():
                        await self._end(_going_away())
                        return
                    await self._outbox.put(item)  # answer what arrived first, then look again
                    continue
                if isinstance(item, _Reply):
                    await self._send_event(item.event)
                    continue
                try:
                    await self._run_job(item)
                finally:
                    item.answered.set()
                    if item in self._open:
                        self._open.remove(item)
                    if not self._open:
                        self.service.admission.idle(self)  # the slot goes unless the next sentence comes
        except _Disconnected:
            self._cancel_all()

    async def _run_job(self, job: _Job) -> None:
        """Send one message's answer: its audio then ``synthesis_complete``, or exactly one ``error``."""
        try:
            sent, samples, pieces = await self._stream_audio(job)
        except _Disconnected:
            raise
        except Exception as exc:
            log.error("model call failed session=%s seq=%d: %r", self.session_id, job.sequence, exc)
            if not job.cancelled:
                await self._fail(
                    job,
                    ErrorCode.SYNTHESIS_FAILED,
                    "the speech model failed on this message; later messages are unaffected",
                )
                return
        if job.cancelled:
            await self._send_error(job, ErrorCode.CANCELLED, "cancelled before it finished")
        elif (failure := self._planning_failure(job)) is not None:
            await self._fail(job, failure.code, failure.message)
        elif job.advance(JobState.DONE):
            audio_ms = round(samples * 1000 / self.service.engine.sample_rate, 1)
            await self._send_event(SynthesisComplete(job.id, job.sequence, audio_ms, sent, pieces))

    async def _stream_audio(self, job: _Job) -> tuple[int, int, int]:
        """Each piece's windows as planning submits them, encoded and sent; (bytes, samples, pieces)."""
        request = job.request
        output = AudioOutput(request.format, request.sample_rate)
        sent = samples = pieces = 0
        while (stream := await job.ready.get()) is not None and not job.cancelled:
            if job.advance(JobState.STARTED):
                await self._send_event(
                    SynthesisStarted(job.id, job.sequence, request.format, request.sample_rate)
                )
            pieces += 1
            piece_start_ms = samples * 1000 / self.service.engine.sample_rate
            async for audio in stream.windows():
                if job.cancelled:
                    break
                if isinstance(audio, Words):
                    if audio.times:
                        words = as_json(shift(audio.times, piece_start_ms))
                        await self._send_event(Alignment(job.id, job.sequence, words))
                    continue
                data = output.encode(audio)
                if data and job.advance(JobState.STREAMING):
                    self.service.metrics.observe_first_audio(time.monotonic() - job.received_at)
                sent += await self._send_audio(data, audio.size)
                samples += audio.size
        if not job.cancelled and job.state is not JobState.QUEUED:
            sent += await self._send_audio(output.flush(), 0)
        return sent, samples, pieces

    def _planning_failure(self, job: _Job) -> ProtocolError | None:
        """What planning raised, as the error to answer (a bug becomes ``synthesis_failed``)."""
        assert job.plan is not None and job.plan.done()
        failure = job.plan.exception()
        if failure is None or isinstance(failure, ProtocolError):
            return failure
        log.error("planning failed session=%s seq=%d", self.session_id, job.sequence, exc_info=failure)
        return ProtocolError(ErrorCode.SYNTHESIS_FAILED, "could not prepare the text for synthesis")

    async def _fail(self, job: _Job, code: ErrorCode | str, message: str) -> None:
        if job.advance(JobState.FAILED):
            await self._send_error(job, code, message)

    async def _send_error(self, job: _Job, code: ErrorCode | str, message: str) -> None:
        self.service.metrics.count_error(str(code))
        await self._send_event(ErrorEvent(str(code), message, job.id, job.sequence))

    async def _send_audio(self, data: bytes, samples: int) -> int:
        """Send encoded audio, never more than ``max_send_ahead_s`` ahead of the listener's playback.

        Whatever is sent sits in socket buffers in front of the server's keepalive pings; a listener that
        reads at playback speed would otherwise fall further behind every second until a ping times out.
        """
        now = time.monotonic()
        ahead = self._playout_end - now - self.service.config.max_send_ahead_s
        if ahead > 0:
            await asyncio.sleep(ahead)
            now = time.monotonic()
        self._playout_end = max(self._playout_end, now) + samples / self.service.engine.sample_rate
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
            # would pin the session's audio in memory. No progress at all for this long: give up and say why.
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


def _going_away() -> _End:
    return _End(
        1001,
        "server shutting down",
        ErrorEvent(ErrorCode.GOING_AWAY, "the server is shutting down; reconnect to go on"),
    )
