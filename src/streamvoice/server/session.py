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
import logging
import time

from starlette.websockets import WebSocket

from streamvoice.protocol import (
    Ack,
    Append,
    Cancel,
    Close,
    Configure,
    End,
    ErrorCode,
    ErrorEvent,
    Flush,
    ProtocolError,
    ServerEvent,
    Synthesize,
    decode_client_frame,
    encode_event,
)
from streamvoice.server.requests import SessionDefaults, configured, configured_body
from streamvoice.server.service import SpeechService
from streamvoice.server.session_message import (
    Closing,
    DrainCheck,
    JobState,
    Message,
    Reply,
    answer,
    closing,
    going_away,
    refusal,
    speech_ends,
)
from streamvoice.server.session_stream import StreamedMessages, check_opening
from streamvoice.server.ws_output import Disconnected, WebSocketOutput, run_reader_and_writer

log = logging.getLogger("streamvoice.session")

# Replies waiting to be sent beyond which a client that sends frames but reads nothing is closed (1008):
# the reader keeps reading, so this, not TCP, bounds what such a client can make the server hold.
MAX_PENDING_REPLIES = 1024


class BidiSession:
    def __init__(self, ws: WebSocket, service: SpeechService, session_id: str) -> None:
        self.ws = ws
        self.service = service
        self.session_id = session_id
        self.defaults = SessionDefaults()
        self.utterances = service.utterances()
        self.streams = StreamedMessages()
        self._outbox: asyncio.Queue[Message | Reply | Closing | DrainCheck] = asyncio.Queue()
        self._open: list[Message] = []  # accepted, not yet answered
        self._sequence = 0
        self._started = time.monotonic()
        self._draining = False
        self._aborted: tuple[int, str] | None = None
        config = service.config
        self.output = WebSocketOutput(
            ws,
            service.metrics,
            service.sample_rate,
            config.send_timeout_s,
            config.max_send_ahead_s,
            on_stalled=self._cancel_all,
            name=f"session={session_id}",
        )
        self.utterances.on_restart = self.output.restart_playout  # the listener's playback starts again

    @property
    def busy(self) -> bool:
        """A message is queued or in flight (what an autoscaler counts; an idle open session is cheap)."""
        return bool(self._open)

    def speaking_until(self) -> float:
        """When (monotonic) the audio of every message this session has queued will have played, as far as
        can be told now: what is decoded, and an estimate of what is not. Admission answers a newcomer at
        once when no slot will free within its wait."""
        return speech_ends(self._open, self.utterances.lane.play_end, time.monotonic())

    def drain(self) -> None:
        """Finish queued messages, answer later ones ``going_away``, then close with 1001."""
        if not self._draining:
            self._draining = True
            self._outbox.put_nowait(DrainCheck())

    async def run(self) -> None:
        self.service.sessions.add(self)
        try:
            await self._run()
        finally:
            self.service.sessions.discard(self)
            self.service.admission.leave(self)

    async def _run(self) -> None:
        try:
            # The reader ended (close requested, the client went away, or a limit): it always queues a
            # Closing, so the writer answers everything queued before it and then closes; unless aborted.
            await run_reader_and_writer(
                self._read_guarded(), self._write_loop(), self.output, lambda: self._aborted
            )
        finally:
            self._cancel_all()

    # -- reading ------------------------------------------------------------------------------------
    async def _read_guarded(self) -> None:
        try:
            await self._read_loop()
        except Exception:
            # A bug in the reader must not leave the writer waiting forever and the session's slot taken.
            log.exception("session=%s: reader failed; closing the session", self.session_id)
            await self._outbox.put(
                Closing(
                    1011, "internal error", ErrorEvent(ErrorCode.INTERNAL, "the session failed; reconnect")
                )
            )

    async def _read_loop(self) -> None:
        cfg = self.service.config
        while True:
            lifetime_left = cfg.session_lifetime_s - (time.monotonic() - self._started)
            if lifetime_left <= 0:
                why = f"sessions last at most {cfg.session_lifetime_s:g} s; open a new session to go on"
                await self._outbox.put(closing(ErrorCode.SESSION_EXPIRED, "session lifetime reached", why))
                return
            try:
                message = await asyncio.wait_for(
                    self.ws.receive(), timeout=min(cfg.idle_timeout_s, lifetime_left)
                )
            except TimeoutError:
                if self._open or time.monotonic() - self._started >= cfg.session_lifetime_s:
                    continue  # busy, or the lifetime check above ends the session
                why = f"no message for {cfg.idle_timeout_s:g} s; session closed"
                await self._outbox.put(closing(ErrorCode.IDLE_TIMEOUT, "idle timeout", why))
                return
            if message["type"] == "websocket.disconnect":
                self._cancel_all()
                await self._outbox.put(Closing(1000, "client went away"))
                return
            if self._outbox.qsize() > MAX_PENDING_REPLIES:
                self.service.metrics.count_error("too_many_pending")
                # the client reads nothing: no answer can reach it, so none is queued; closed at once
                self._aborted = (1008, "too many unanswered frames")
                self._cancel_all()
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
            case Append() | Flush() | End():
                await self._stream(msg)
            case Configure():
                await self._configure(msg)
            case Cancel(id=target):
                # No id: everything open (barge-in); an id: that message only, the rest goes on.
                ids = self._cancel(target)
                await self._outbox.put(Reply(Ack("cancelled", {"ids": ids, "count": len(ids)})))
            case Close():
                await self._outbox.put(
                    Closing(1000, "client closed", Ack("session_closed", {"session": self.session_id}))
                )
                return True
        return False

    def _next_sequence(self) -> int:
        seq = self._sequence
        self._sequence += 1
        return seq

    async def _reply_error(self, exc: ProtocolError, sequence: int | None) -> None:
        self.service.metrics.count_error(str(exc.code))
        await self._outbox.put(Reply(ErrorEvent(str(exc.code), exc.message, exc.id, sequence)))

    async def _accept(self, msg: Synthesize) -> None:
        sequence = self._next_sequence()
        limit = self.service.config.max_queued_messages
        if (refused := refusal(self._draining, len(self._open), limit, msg.id)) is not None:
            await self._reply_error(refused, sequence)
            return
        try:
            request = self.service.requests.message(msg, self.defaults)
            if msg.stream:
                check_opening(msg.text, self.service.stream_bounds.max_chars, msg.id)
        except ProtocolError as exc:
            await self._reply_error(exc, sequence)
            return
        if not await self._admit(msg.id, sequence):
            return
        previous = self._open[-1] if self._open else None
        utterance = self.utterances.start(request, msg.id, gate=lambda: self._gate(previous))
        job = Message(sequence, msg.id, request, time.monotonic(), utterance)
        if msg.stream:
            self.streams.start(job, msg.text)
        else:
            utterance.say()
        self._open.append(job)
        self.service.metrics.count_message()
        await self._outbox.put(job)

    async def _stream(self, msg: Append | Flush | End) -> None:
        """Text for a streamed message, a flush or its end; a problem is answered without a sequence."""
        try:
            match msg:
                case Append(text=text, id=uid):
                    self.streams.append(uid, text)
                case Flush(id=uid):
                    self.streams.flush(uid)
                case End(id=uid):
                    self.streams.end(uid)
        except ProtocolError as exc:
            await self._reply_error(exc, None)

    async def _admit(self, msg_id: str | None, sequence: int) -> bool:
        """A listener slot for this session: held, taken, waited for (told now), or refused (told now)."""
        admission = self.service.admission
        decision = admission.enter(self)
        if decision == "refused":
            busy = admission.busy("no listener slot is free").naming(id=msg_id)
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
            await self._outbox.put(Reply(Ack("queued", detail)))
        return True

    async def _gate(self, previous: Message | None) -> None:
        """Before a message is planned: the one before it is planned (one planner per session, in message
        order, so deadlines follow speaking order and a client cannot occupy the planning thread with many
        messages at once), and a listener slot is held."""
        if previous is not None:
            await previous.utterance.planned()
            if not self.service.config.pipeline:
                # The reference design, kept as a benchmark baseline: nothing starts until the last answer left.
                await previous.answered.wait()
        admission = self.service.admission
        await admission.wait(self)  # server_busy (answered for this message) if no slot frees in time
        if not admission.holds(self):
            raise admission.busy("this session's wait for a listener slot ran out")

    async def _configure(self, msg: Configure) -> None:
        pauses = self.service.config.pauses
        candidate = configured(self.defaults, msg, pauses)
        try:
            self.service.requests.resolve("x", candidate)
        except ProtocolError as exc:
            await self._reply_error(exc, None)
            return
        self.defaults = candidate
        await self._outbox.put(Reply(Ack("configured", configured_body(candidate, pauses))))

    def _cancel_all(self) -> list[str | None]:
        return self._cancel(None)

    def _cancel(self, target: str | None) -> list[str | None]:
        """Cancel the open messages (``target`` None) or the one with that id; their ids."""
        cancelled = self.utterances.cancel(target)  # restarts the playout when the one speaking goes
        jobs = [j for j in self._open if j.utterance in cancelled]
        for job in jobs:
            job.advance(JobState.CANCELLED)
        return [job.id for job in jobs]

    # -- writing ------------------------------------------------------------------------------------
    async def _write_loop(self) -> None:
        try:
            while True:
                item = await self._outbox.get()
                if isinstance(item, Closing):
                    await self._end(item)
                    return
                if isinstance(item, DrainCheck):
                    if self._outbox.empty():
                        await self._end(going_away())
                        return
                    await self._outbox.put(item)  # answer what arrived first, then look again
                    continue
                if isinstance(item, Reply):
                    await self._send_event(item.event)
                    continue
                try:
                    await self._run_job(item)
                finally:
                    item.answered.set()
                    self.streams.forget(item)
                    self.utterances.done(item.utterance)
                    if item in self._open:
                        self._open.remove(item)
                    if not self._open:
                        self.service.admission.idle(self)  # the slot goes unless the next sentence comes
        except Disconnected:
            self._cancel_all()

    async def _run_job(self, job: Message) -> None:
        """Send one message's answer: its audio then ``synthesis_complete``, or exactly one ``error``."""
        metrics = self.service.metrics
        try:
            await answer(job, self.output, metrics, self.service.sample_rate)
        except Disconnected:
            raise
        except Exception as exc:  # a bug while answering: this message fails, the session goes on
            log.error(
                "session=%s seq=%d: answering failed: %s", self.session_id, job.sequence, type(exc).__name__
            )
            if job.advance(JobState.FAILED):
                metrics.count_error(str(ErrorCode.SYNTHESIS_FAILED))
                failed = ErrorEvent(
                    str(ErrorCode.SYNTHESIS_FAILED), "could not answer this message", job.id, job.sequence
                )
                await self._send_event(failed)

    async def _send_event(self, event: ServerEvent) -> None:
        await self.output.send(encode_event(event))

    async def _end(self, item: Closing) -> None:
        last = encode_event(item.event) if item.event is not None else None
        await self.output.close(item.code, item.reason, last)
