"""A vendor's streaming-TTS WebSocket over the utterance core: contexts of streamed text in, audio out.

ElevenLabs' stream-input, Cartesia's contexts and Deepgram's Speak / Flush have one shape: a connection
carries contexts (one per answer), each fed text as a language model writes it, flushed, ended or
cancelled, and answered with audio, word or character times, and a "done" of the wire's own. This class is
that shape, once; each wire subclasses it to parse its frames (``on_frame``) and render the events
(``audio_frames``, ``words_frame``, ``done_frame``, ``failed_frame``, ``error_frame``).

What every wire gets from here, with the session protocol's settings:

- contexts answered in the order they were opened, on one listener lane (one voice per connection);
- at most ``max_queued_messages`` contexts open or answering: the one past it is refused in the wire's error
  shape and the connection goes on (never a dropped socket with live contexts on it);
- at most ``max_stream_chars`` of text per context and a context with no text for ``stream_text_timeout_s``
  ended as it stands (``utterance.StreamBounds``, the same on every surface);
- ``idle_timeout_s`` without a frame and ``session_lifetime_s`` close the socket; a frame over
  ``limits.max_message_bytes`` or not a JSON object is answered in the wire's error shape;
- a client that reads nothing: ``WebSocketOutput`` closes it (1008) and at most ``MAX_PENDING_REPLIES``
  answers wait unsent;
- one listener slot (admission) per connection, taken when a context opens, given back when idle;
- drain: open contexts finish, new ones are refused ``going_away``, then 1001.

Checked by ``pytest tests/test_vendor_socket.py`` and the per-wire tests.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from starlette.websockets import WebSocket

from streamvoice.audio.output import AudioOutput
from streamvoice.engine.alignment import WordTime
from streamvoice.protocol import ErrorCode, ProtocolError, check_text, parse_json_object
from streamvoice.server.guards import authorized, reserve, service_of
from streamvoice.server.piece_audio import Words
from streamvoice.server.requests import ResolvedRequest
from streamvoice.server.service import SpeechService
from streamvoice.server.session import MAX_PENDING_REPLIES
from streamvoice.server.session_message import Closing, DrainCheck, closing, going_away, speech_ends
from streamvoice.server.utterance import Completed, Failed, PieceEnded, PieceStarted, Utterance
from streamvoice.server.ws_output import (
    AUDIO_FRAME_BYTES,
    Disconnected,
    WebSocketOutput,
    run_reader_and_writer,
)

log = logging.getLogger("streamvoice.vendor")

Frame = str | bytes
CLOSED_IDS = 1024  # closed contexts remembered per connection, so a late message to one is told so


def context_id(raw: object, field: str = "context_id") -> str | None:
    """A client's context id as text (a number is taken as written; at most 128 characters), None when
    absent; anything else is ``invalid_field`` (an object was echoed back as its Python repr)."""
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise ProtocolError(ErrorCode.INVALID_FIELD, f'"{field}" must be a string')
    return str(raw)[:128]


@dataclass(eq=False)
class Context:
    """One answer on a vendor connection: its id on the wire, its request, its utterance."""

    id: str
    request: ResolvedRequest
    utterance: Utterance
    opened_at: float
    first_audio_at: float | None = None
    sent_samples: int = 0  # at the model's rate
    spoken: bool = False  # has had words (not only the keep-alive space)
    wire: dict[str, Any] = field(default_factory=dict)  # the wire's own per-context state

    @property
    def taking_text(self) -> bool:
        return not self.utterance.ended and not self.utterance.cancelled


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class ContextSocket:
    name = "vendor"
    # ElevenLabs: a context that gets words while an older one, already closed, is still speaking takes
    # the voice (the older is cancelled). Its clients close a context to interrupt it and open the next.
    newest_takes_over = False

    def __init__(self, ws: WebSocket, service: SpeechService, connection_id: str) -> None:
        self.ws = ws
        self.service = service
        self.connection_id = connection_id
        config = service.config
        self.utterances = service.utterances()
        self.open: dict[str, Context] = {}  # taking text
        self.answering: list[Context] = []  # every context not yet answered, in order
        # ids of the last contexts closed (bounded: CLOSED_IDS), oldest first, and why: "cancelled" or "ended"
        self.closed: dict[str, str] = {}
        self._outbox: asyncio.Queue[Context | Frame | Closing | DrainCheck] = asyncio.Queue()
        self._notices: asyncio.Queue[Frame] = asyncio.Queue()  # sent at once (``refuse``)
        self._started = time.monotonic()
        self._aborted: tuple[int, str] | None = None  # the reader gave up on the client: close at once
        self._draining = False
        self.output = WebSocketOutput(
            ws,
            service.metrics,
            service.sample_rate,
            config.send_timeout_s,
            config.max_send_ahead_s,
            on_stalled=self.cancel,
            name=f"{self.name}={connection_id}",
        )
        self.utterances.on_restart = self.output.restart_playout

    # -- the wire's side ----------------------------------------------------------------------------
    async def on_frame(self, obj: dict[str, Any]) -> bool:
        """One parsed client frame; True when the client asked to close (after what is queued)."""
        raise NotImplementedError

    def audio_frames(self, ctx: Context, data: bytes, samples: int) -> list[Frame]:
        """``data`` encoded, covering ``samples`` at the model's rate after ``ctx.sent_samples``."""
        return [data[i : i + AUDIO_FRAME_BYTES] for i in range(0, len(data), AUDIO_FRAME_BYTES)]

    def words_frame(self, ctx: Context, times: list[WordTime]) -> Frame | None:
        return None

    def done_frame(self, ctx: Context) -> Frame | None:
        return None

    def cancelled_frame(self, ctx: Context) -> Frame | None:
        return None

    def failed_frame(self, ctx: Context, error: ProtocolError) -> Frame | None:
        return self.error_frame(error, ctx.id)

    def error_frame(self, error: ProtocolError, context_id: str | None) -> Frame | None:
        raise NotImplementedError

    def after_answer(self, ctx: Context) -> bool:
        """True to close the socket once this context is answered (ElevenLabs' single stream-input)."""
        return False

    # -- what the service sees ----------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        return bool(self.answering)

    def speaking_until(self) -> float:
        return speech_ends(self.answering, self.utterances.lane.play_end, time.monotonic())

    def drain(self) -> None:
        if not self._draining:
            self._draining = True
            self._outbox.put_nowait(DrainCheck())

    # -- contexts -----------------------------------------------------------------------------------
    def send(self, frame: Frame | None) -> None:
        """Queue a frame behind the answers already queued."""
        if frame is not None:
            self._outbox.put_nowait(frame)

    def refuse(self, error: ProtocolError, context_id: str | None) -> None:
        """Answer a refused frame or context now, not behind the answers queued: the vendors' wires name
        the context in every message, so a refusal need not wait for other contexts' audio."""
        self.service.metrics.count_error(str(error.code))
        frame = self.error_frame(error, context_id)
        if frame is not None:
            self._notices.put_nowait(frame)

    def start(self, cid: str, request: ResolvedRequest) -> Context | None:
        """Open a context (or answer why not, in the wire's shape, and return None)."""
        limit = self.service.config.max_queued_messages
        if self._draining:
            why = "the server is shutting down; open a new connection (to another instance) and resend"
            self.refuse(ProtocolError(ErrorCode.GOING_AWAY, why), cid)
            return None
        if len(self.answering) >= limit:
            why = (
                f"{len(self.answering)} contexts are open on this connection (limit {limit}); close or "
                "cancel one, or wait for one to finish, before opening another"
            )
            self.refuse(ProtocolError(ErrorCode.QUEUE_FULL, why), cid)
            return None
        admission = self.service.admission
        if admission.enter(self) == "refused":
            self.refuse(admission.busy("no listener slot is free"), cid)
            return None
        previous = self.answering[-1] if self.answering else None
        utterance = self.utterances.start(request, cid, gate=lambda: self._gate(previous))
        ctx = Context(cid, request, utterance, time.monotonic())
        self.open[cid] = ctx
        self.answering.append(ctx)
        utterance.on_idle = lambda: self._close(ctx)  # no text for a while: ended as it stood
        self.service.metrics.count_message()
        self._outbox.put_nowait(ctx)
        return ctx

    def append(self, ctx: Context, text: str) -> None:
        """Text for a context (the utterance bounds it: ``StreamBounds``; past its characters it ends)."""
        check_text(text, self.service.config.limits, ctx.id, speakable=False)
        if not ctx.spoken and text.strip():
            ctx.spoken = True
            if self.newest_takes_over:  # by context, not by id: a reused id names the new one too
                older = [
                    c
                    for c in self.answering
                    if c is not ctx and not c.taking_text and not c.utterance.cancelled
                ]
                self.utterances.cancel_these([c.utterance for c in older])
                for c in older:
                    self._close(c)
        try:
            ctx.utterance.append(text)
        except ProtocolError:
            self._close(ctx)
            raise

    def flush(self, ctx: Context) -> None:
        ctx.utterance.flush()

    def end(self, ctx: Context) -> None:
        """No more text for this context: what it has is spoken, then it is answered done."""
        ctx.utterance.end()
        self._close(ctx)

    def cancel(self, cid: str | None = None) -> list[Context]:
        """Stop the context with this id (None: every one); those cancelled."""
        cancelled = self.utterances.cancel(cid)
        contexts = [c for c in self.answering if c.utterance in cancelled]
        for ctx in contexts:
            self._close(ctx)
        return contexts

    def _close(self, ctx: Context) -> None:
        if self.open.get(ctx.id) is ctx:
            del self.open[ctx.id]
        self.closed[ctx.id] = "cancelled" if ctx.utterance.cancelled else "ended"
        if len(self.closed) > CLOSED_IDS:
            del self.closed[next(iter(self.closed))]

    async def _gate(self, previous: Context | None) -> None:
        """One planner per connection, in context order; a listener slot held before planning."""
        if previous is not None:
            await previous.utterance.planned()
        admission = self.service.admission
        await admission.wait(self)
        if not admission.holds(self):
            raise admission.busy("this connection's wait for a listener slot ran out")

    # -- running ------------------------------------------------------------------------------------
    async def run(self) -> None:
        self.service.sessions.add(self)
        notices = asyncio.create_task(self._notice_loop(), name=f"notices-{self.connection_id}")
        try:
            await run_reader_and_writer(
                self._read_guarded(), self._write_loop(), self.output, lambda: self._aborted
            )
        finally:
            notices.cancel()
            self.cancel()
            await asyncio.gather(notices, return_exceptions=True)
            self.service.sessions.discard(self)
            self.service.admission.leave(self)

    async def _read_guarded(self) -> None:
        try:
            await self._read_loop()
        except Exception:
            log.exception("%s=%s: reader failed; closing", self.name, self.connection_id)
            await self._outbox.put(Closing(1011, "internal error"))

    async def _read_loop(self) -> None:
        cfg = self.service.config
        while True:
            left = cfg.session_lifetime_s - (time.monotonic() - self._started)
            if left <= 0:
                why = f"connections last at most {cfg.session_lifetime_s:g} s; open a new one"
                await self._outbox.put(closing(ErrorCode.SESSION_EXPIRED, "lifetime reached", why))
                return
            try:
                message = await asyncio.wait_for(self.ws.receive(), timeout=min(cfg.idle_timeout_s, left))
            except TimeoutError:
                if self.answering:
                    continue
                await self._outbox.put(Closing(1000, f"no message for {cfg.idle_timeout_s:g} s"))
                return
            if message["type"] == "websocket.disconnect":
                self.cancel()
                await self._outbox.put(Closing(1000, "client went away"))
                return
            if self._outbox.qsize() + self._notices.qsize() > MAX_PENDING_REPLIES:
                self.service.metrics.count_error("too_many_pending")
                self._aborted = (1008, "too many unanswered frames")  # closed at once, contexts cancelled
                self.cancel()
                return
            data = message.get("text")
            if data is None:
                data = message.get("bytes") or b""
            try:
                if await self.on_frame(parse_json_object(data, cfg.limits)):
                    await self._outbox.put(Closing(1000, "client closed"))
                    return
            except ProtocolError as exc:
                self.refuse(exc, exc.id)
            except Exception:
                log.exception("%s=%s: frame handling failed", self.name, self.connection_id)
                self.refuse(ProtocolError(ErrorCode.INTERNAL, "the server could not handle this frame"), None)

    async def _write_loop(self) -> None:
        try:
            while True:
                item = await self._outbox.get()
                if isinstance(item, Closing):
                    await self.output.close(item.code, item.reason)
                    return
                if isinstance(item, DrainCheck):
                    if self._outbox.empty() and not self.answering:
                        done = going_away()
                        await self.output.close(done.code, done.reason)
                        return
                    await asyncio.sleep(0.05)
                    await self._outbox.put(item)
                    continue
                if isinstance(item, str | bytes):
                    await self.output.send(item)
                    continue
                try:
                    await self._answer(item)
                finally:
                    if self.open.get(item.id) is item:
                        del self.open[item.id]
                    self.utterances.done(item.utterance)
                    if item in self.answering:
                        self.answering.remove(item)
                    if not self.answering:
                        self.service.admission.idle(self)
                if self.after_answer(item):
                    await self.output.close(1000, "stream ended")
                    return
        except Disconnected:
            self.cancel()

    async def _notice_loop(self) -> None:
        try:
            while True:
                await self.output.send(await self._notices.get())
        except Disconnected:
            self.cancel()

    async def _answer(self, ctx: Context) -> None:
        request = ctx.request
        output = AudioOutput(request.format, request.sample_rate)
        metrics = self.service.metrics
        async with aclosing(ctx.utterance.events()) as events:
            async for item in events:
                match item:
                    case PieceStarted() | PieceEnded():
                        pass
                    case Words(times=times):
                        if times:
                            await self._send(self.words_frame(ctx, times))
                    case Completed():
                        tail = output.flush()
                        if tail:
                            await self._audio(ctx, tail, 0)
                        await self._send(self.done_frame(ctx))
                    case Failed(error=failure):
                        if failure.code == ErrorCode.EMPTY_TEXT:
                            await self._send(self.done_frame(ctx))  # vendors answer an empty context done
                        elif failure.code == ErrorCode.CANCELLED or ctx.utterance.cancelled:
                            await self._send(self.cancelled_frame(ctx))
                        else:
                            metrics.count_error(str(failure.code))
                            await self._send(self.failed_frame(ctx, failure))
                    case _:
                        data = output.encode(item)
                        if data:
                            if ctx.first_audio_at is None:
                                ctx.first_audio_at = time.monotonic()
                                metrics.observe_first_audio(ctx.first_audio_at - ctx.opened_at)
                            await self._audio(ctx, data, item.size)

    async def _audio(self, ctx: Context, data: bytes, samples: int) -> None:
        await self.output.pace(samples)
        frames = self.audio_frames(ctx, data, samples)
        ctx.sent_samples += samples
        for frame in frames:
            await self.output.send(frame)

    async def _send(self, frame: Frame | None) -> None:
        if frame is not None:
            await self.output.send(frame)


async def serve(
    ws: WebSocket,
    make: Callable[[WebSocket, SpeechService, str], ContextSocket],
    refusal: Callable[[ProtocolError], Frame],
) -> None:
    """A vendor socket's life: the key before the upgrade (a caller without it learns nothing and gets
    403), a slot counted before any await, the wire's own checks of the URL, then the connection."""
    service = service_of(ws)
    if not authorized(ws, service):
        await ws.close(1008, "unauthorized")  # before accept(): the upgrade is refused with HTTP 403
        return
    try:
        slot = reserve(service, "session")
    except ProtocolError as problem:
        await _refuse(ws, problem, refusal)
        return
    assert service is not None
    try:
        sock = make(ws, service, uuid.uuid4().hex[:12])
    except ProtocolError as problem:
        slot.release()
        service.metrics.count_error(str(problem.code))
        await _refuse(ws, problem, refusal)
        return
    try:
        await ws.accept()
        await sock.run()
    finally:
        slot.release()


async def _refuse(ws: WebSocket, problem: ProtocolError, refusal: Callable[[ProtocolError], Frame]) -> None:
    """Why no stream starts, in the wire's shape, then the close (1013: retry later; 1008: fix the call)."""
    await ws.accept()
    frame = refusal(problem)
    await (ws.send_text(frame) if isinstance(frame, str) else ws.send_bytes(frame))
    await ws.close(1013 if problem.http_status >= 500 else 1008, str(problem.code).replace("_", " "))
