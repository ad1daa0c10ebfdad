"""The one connection runtime every socket wire stands on: the session protocol, the vendors' sockets and Wyoming.

A connection carries answers (a session's messages, a vendor's contexts, a Wyoming utterance) in the order
they were opened, on one listener lane. What is written here once, and nowhere else:

- what the listener heard at a cut (``playout``);
- two tasks: the reader parses frames as they arrive and never stops reading (a client's keepalive pongs
  travel behind its data; a paused reader would get a busy client disconnected), the writer (``writer``)
  answers what the reader queued, in order, so audio never interleaves and every answer gets exactly one
  ending;
- ``idle_timeout_s`` without a frame (while nothing is queued) and ``session_lifetime_s`` end the
  connection, told in the wire's shape first (``closing_frame``);
- a cap on replies waiting unsent (``outbox``): a client that floods while it reads is slowed, one that
  reads nothing is closed at once, its answers cancelled and its listener slot freed;
- a client that stops reading is closed by the transport (1008 after ``send_timeout_s``);
- its seat (``core.seat``): every answer opened one way (the slot, then the utterance; one planner per
  connection, in answer order), the slot given back when the connection goes idle or away;
- drain: queued answers finish, new ones are refused ``going_away``, then 1001; event-driven, no polling;
- the upgrade (``upgrade.serve``): the key before anything else, the session cap counted before any
  ``await``, the wire's own checks, then the connection; a refusal in the wire's shape, one close-code rule.

A wire subclasses ``Connection``: ``on_frame`` parses one frame into calls on its answers, the render
methods turn the utterance's events (``rendering.encoded_events``) into frames. Checked by
``pytest tests/test_connection.py`` and every wire's tests.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.requests import Prepare, ResolvedRequest
from streamvoice.server.core.seat import Opened, Seat
from streamvoice.server.core.service import SpeechService
from streamvoice.server.core.tenancy import current
from streamvoice.server.surfaces.answer import Answer, Renderer
from streamvoice.server.surfaces.outbox import Closing, DrainCheck, Outbox, Reply
from streamvoice.server.surfaces.playout import Cut, Playout
from streamvoice.server.surfaces.transport import Disconnected, Transport, run_reader_and_writer
from streamvoice.server.surfaces.writer import Writer

log = logging.getLogger("streamvoice.connection")


class Connection[F, A: Answer](Renderer[F, A]):
    """A wire's connection: subclass it, supply ``on_frame`` and the render methods (``answer.Renderer``);
    ``A`` is the wire's answer (its typed per-answer state), so a wire never downcasts what it is given."""

    name = "connection"  # in the logs: "<name>=<id>"

    def __init__(self, transport: Transport[F], service: SpeechService, connection_id: str) -> None:
        self.transport = transport
        self.service = service
        self.connection_id = connection_id
        self.seat = Seat(service, on_connection=True)  # its answers, listener slot and room (``hold``)
        self.utterances = self.seat.utterances
        self.utterances.on_restart = transport.restart_playout  # the listener's playback starts again
        transport.on_stalled = self.cancel
        self.answering: list[A] = []  # every answer not yet finished, in order
        self.playout = Playout[A](service.sample_rate)  # where each answer sits on the listener's player
        self.outbox = Outbox[F, A](transport.send)
        self._started = time.monotonic()
        self._draining = False
        self.tenant = current()  # whose key opened it (``upgrade.serve`` checked it before this)
        self._revoked = False
        self._aborted: tuple[int, str] | None = None  # the reader gave up on the client: close at once

    # -- the wire's side ----------------------------------------------------------------------------
    async def on_frame(self, frame: F) -> bool:
        """One client frame; True when the client asked to close (after what is queued)."""
        raise NotImplementedError

    def refused(self, error: ProtocolError) -> None:
        """A frame the wire could not take: answer it (``reply`` in order, or ``notice`` now)."""
        raise NotImplementedError

    def closing_frame(self, code: ErrorCode, message: str) -> F | None:
        """What the client is told before the server ends the connection (idle, lifetime, drain, a bug)."""
        return None

    def finished(self, answer: A) -> None:
        """The answer is over, however it ended (the wire forgets it)."""

    def after_answer(self, answer: A) -> bool:
        """True to close once this answer is sent (ElevenLabs' single stream-input)."""
        return False

    # -- what the service sees ----------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        """An answer is queued or in flight (what an autoscaler counts; an idle open connection is cheap)."""
        return bool(self.answering)

    def drain(self) -> None:
        if not self._draining:
            self._draining = True
            self.outbox.put(DrainCheck())

    @property
    def draining(self) -> bool:
        return self._draining

    def revoke(self) -> None:
        """Its key was revoked (on any replica) or expired: its answers stop, nothing more is taken, and
        the connection closes with the wire's ``unauthorized`` error (1008: fix the call)."""
        if self._revoked:
            return
        self._revoked = True
        self.cancel()
        why = "the key this connection opened with was revoked or has expired; reconnect with a live key"
        frame = self.revoked_frame(ProtocolError(ErrorCode.UNAUTHORIZED, why))
        self.outbox.put(Closing(1008, "key revoked", frame))

    def revoked_frame(self, error: ProtocolError) -> F | None:
        """What the client is told when its key is revoked: the wire's closing frame, unless it has a
        better way to say ``unauthorized`` (the vendors' sockets: their error message)."""
        return self.closing_frame(ErrorCode.UNAUTHORIZED, error.message)

    # -- queueing -----------------------------------------------------------------------------------
    def reply(self, frame: F | None) -> None:
        """Queue a frame behind the answers already queued."""
        if frame is not None:
            self.outbox.put(Reply(frame))

    def reply_later(self, make: Callable[[], F | None]) -> None:
        """Queue a frame made when its turn comes (a summary of the answers before it)."""
        self.outbox.put(Reply(make))

    def notice(self, frame: F | None) -> None:
        """Send a frame now, not behind the answers queued (the vendors' wires name the answer in every
        message, so a refusal need not wait for other answers' audio)."""
        if frame is not None:
            self.outbox.notice(frame)

    def count_error(self, error: ProtocolError) -> None:
        self.service.metrics.count_error(str(error.code))

    def open_answer(self, answer: A) -> A:
        """Queue an accepted answer: it is answered in order, after every answer opened before it."""
        self.answering.append(answer)
        self.service.metrics.count_message()
        self.outbox.put(answer)
        return answer

    def previous(self) -> A | None:
        return self.answering[-1] if self.answering else None

    def refusal(self, limit_noun: str, what_to_do: str) -> ProtocolError | None:
        """Why this connection takes no more answers now (its key revoked, shutting down, or its queue is
        full), if so."""
        if self._revoked:
            return ProtocolError(ErrorCode.UNAUTHORIZED, "this connection's key was revoked")
        if self._draining:
            why = "the server is shutting down; open a new connection (to another instance) and resend"
            return ProtocolError(ErrorCode.GOING_AWAY, why)
        limit = self.service.config.max_queued_messages
        if len(self.answering) >= limit:
            why = f"{len(self.answering)} {limit_noun} are open on this connection (limit {limit}); {what_to_do}"
            return ProtocolError(ErrorCode.QUEUE_FULL, why)
        return None

    def begin(
        self,
        request: ResolvedRequest,
        uid: str | None,
        can_wait: bool = True,
        own_room: bool = False,
        prepare: Prepare | None = None,
    ) -> Opened:
        """Start an answer on this connection's seat, behind every answer opened before it (``Seat.open``:
        the slot, then the utterance); ``server_busy`` raised before anything starts."""
        after = previous.utterance if (previous := self.previous()) else None
        return self.seat.open(request, uid, after, can_wait, own_room, prepare)

    def cancel(self, target: str | None = None) -> list[A]:
        """Stop the answer with this id (None: every one); those cancelled."""
        cancelled = self.utterances.cancel(target)  # restarts the playout when the one speaking goes
        return [a for a in self.answering if a.utterance in cancelled]

    def cut(self, target: str | None = None, played_ms: float | None = None) -> Cut[A]:
        """Cancel (as ``cancel``) and say what the listener heard of each answer the cut stops: the ones
        cancelled and, on a barge-in (no ``target``), finished ones whose audio was still playing.
        ``played_ms``: where the caller's player is on the timeline (None: the server's playout clock); a
        position before the last cut's is ``invalid_field`` and nothing is cancelled."""
        return self.playout.cut(target, played_ms, self.transport.unplayed_s(), self.cancel)

    # -- running ------------------------------------------------------------------------------------
    async def run(self, first: F | None = None) -> None:
        """Serve the connection; ``first``: a frame already read (the one that brought a browser's key)."""
        self.service.connections.add(self)  # from here a revocation reaches it (``SpeechService._revoked``)
        if self.tenant is not None and not self.service.keyring.holds(self.tenant):
            self.revoke()  # revoked while the upgrade awaited (its lease, the accept): closed as any other
        notices = asyncio.create_task(self._notice_loop(), name=f"notices-{self.connection_id}")
        try:
            await run_reader_and_writer(
                self._read_guarded(first), Writer(self).run(), self.transport, lambda: self._aborted
            )
        finally:
            notices.cancel()
            self.cancel()
            await asyncio.gather(notices, return_exceptions=True)
            self.service.connections.discard(self)
            self.seat.leave()

    def closing(self, code: ErrorCode, reason: str, message: str, close_code: int = 1000) -> Closing[F]:
        """The outbox item that ends the connection, told first in the wire's shape (``closing_frame``)."""
        return Closing(close_code, reason, self.closing_frame(code, message))

    async def _read_guarded(self, first: F | None) -> None:
        try:
            await self._read_loop(first)
        except Exception:
            # A bug in the reader must not leave the writer waiting forever and the listener slot taken.
            log.exception("%s=%s: reader failed; closing", self.name, self.connection_id)
            message = "the connection failed; reconnect"
            self.outbox.put(self.closing(ErrorCode.INTERNAL, "internal error", message, 1011))

    async def _read_loop(self, first: F | None) -> None:
        cfg = self.service.config
        while True:
            left = cfg.session_lifetime_s - (time.monotonic() - self._started)
            if left <= 0:
                why = f"connections last at most {cfg.session_lifetime_s:g} s; open a new one to go on"
                self.outbox.put(self.closing(ErrorCode.SESSION_EXPIRED, "lifetime reached", why))
                return
            idle_s = cfg.idle_timeout_s
            try:
                if first is not None:
                    frame: F | None = first
                    first = None
                else:
                    frame = await asyncio.wait_for(self.transport.receive(), timeout=min(idle_s, left))
            except TimeoutError:
                if self.answering or time.monotonic() - self._started >= cfg.session_lifetime_s:
                    continue  # busy, or the lifetime check above ends the connection
                why = f"no message for {idle_s:g} s; the connection is closed"
                self.outbox.put(self.closing(ErrorCode.IDLE_TIMEOUT, "idle timeout", why))
                return
            if frame is None:
                self.cancel()
                self.outbox.put(Closing(1000, "client went away"))
                return
            if not await self.outbox.room():
                self.service.metrics.count_error("too_many_pending")
                self._aborted = (1008, "too many unanswered frames")  # closed at once, answers cancelled
                self.cancel()
                return
            try:
                if await self.on_frame(frame):
                    self.outbox.put(Closing(1000, "client closed"))
                    return
            except ProtocolError as exc:
                self.count_error(exc)
                self.refused(exc)
            except Exception:
                log.exception("%s=%s: frame handling failed", self.name, self.connection_id)
                internal = ProtocolError(ErrorCode.INTERNAL, "the server could not handle this message")
                self.count_error(internal)
                self.refused(internal)

    async def _notice_loop(self) -> None:
        try:
            await self.outbox.deliver_notices()
        except Disconnected:
            self.cancel()

    def handed_over(self, answer: A) -> F | None:
        """What the wire tells a listener whose turn is over and who waits for its slot again."""
        return None
