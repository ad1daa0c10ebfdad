"""A listener's seat: the one place a caller is refused, admitted, answered and given everything back.

A seat owns its room (the session cap and its tenant's share: ``core.rooms``), its listener slot in admission
(the seat is what admission holds and the slowdown watch sheds), and its answers (``Utterances``, over its
lane). A socket wire's connection keeps one seat for its life; an HTTP answer takes one for its body. Every
answer opens the same way, written once here: the slot (held, taken, waited for, or ``server_busy`` at once),
then the utterance behind the answer before it; before it plans, the utterance waits in ``gate`` (the answer
before it planned, so deadlines follow speaking order and one client cannot occupy the planning thread, then
the slot held). ``leave`` gives back all of it, and the request's ``Holdings`` calls it on any path a surface
missed. No surface calls admission: ``grep -rn "admission\\." src/streamvoice/server/surfaces`` finds none.
Checked by ``pytest tests/test_seat.py tests/test_holdings.py`` and every wire's tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from streamvoice.protocol import ProtocolError
from streamvoice.server.core import rooms
from streamvoice.server.core.lane import Lane
from streamvoice.server.core.requests import Prepare, ResolvedRequest, speech_ends
from streamvoice.server.core.service import SpeechService
from streamvoice.server.core.tenancy import current
from streamvoice.server.core.utterance import Utterance
from streamvoice.store.keys import Tenant


@dataclass(frozen=True)
class Opened:
    """An answer started: its utterance, and whether it waits for a listener slot (``queued``: its place
    and how long it may wait, for the wire to tell)."""

    utterance: Utterance
    queued: bool = False
    position: int = 0
    max_wait_s: float = 0.0


@dataclass(frozen=True)
class _Queued:
    """An open answer as ``requests.speech_ends`` reads it."""

    request: ResolvedRequest
    utterance: Utterance
    first_audio_at: float | None


class Seat:
    """One listener: on a connection (a socket wire's, for its life) or alone (one HTTP answer).

    A connection's seat hands its listener slot over at a pause and takes it back (a socket can pause between
    answers); an HTTP answer's keeps it to its end (its body cannot be paused for another listener's turn
    without a silence its player cannot be told of), and admission's retry hint counts to that end
    (``tests/test_admission.py::test_a_retry_hint_counts_an_http_answer_to_its_end``).
    """

    def __init__(self, service: SpeechService, on_connection: bool, room: rooms.Room | None = None) -> None:
        self.service = service
        self.admission = service.admission
        self.utterances = service.utterances()
        self.hands_over = on_connection
        self.tenant: Tenant | None = room.tenant if room is not None else current()
        self._rooms: list[rooms.Room] = []
        # By id(utterance): the rooms of a wire that counts its answers, not itself, in the session cap.
        self._answer_rooms: dict[int, rooms.Room] = {}
        self._left = False
        if room is not None:
            self.hold(room)
        if not on_connection:
            service.answers.add(self)  # stopped here when its key is revoked (a connection stops its own)

    @classmethod
    def alone(cls, service: SpeechService | None) -> Seat:
        """A seat for one HTTP answer, its room counted now (before any ``await``), or the refusal raised."""
        room = rooms.take(service, "stream")
        assert service is not None
        return cls(service, on_connection=False, room=room)

    def hold(self, room: rooms.Room) -> None:
        """The seat owns ``room`` from here: ``leave`` gives it back (a socket's room is taken at the upgrade,
        before its connection exists)."""
        room.on_release = self.leave
        self._rooms.append(room)

    async def claim(self) -> None:
        """Its tenant's share across every replica (``Room.claim``)."""
        for room in self._rooms:
            await room.claim()

    # -- answers ------------------------------------------------------------------------------------
    def open(
        self,
        request: ResolvedRequest,
        uid: str | None,
        after: Utterance | None,
        can_wait: bool = True,
        own_room: bool = False,
        prepare: Prepare | None = None,
    ) -> Opened:
        """Admit the listener and start an answer behind ``after`` (the answer opened before it, if still
        open); the refusal (``server_busy``, or full) raised before anything starts. ``can_wait`` False: a
        wire that cannot tell a caller it waits (no "queued" in it) is admitted or refused at once.
        ``own_room``: the answer takes a room of its own until ``done`` (a wire whose connections are capped
        apart, a raw TCP wire, counts its answers in the session cap instead). ``prepare``: what the request
        still needs from the store, awaited before planning (``Utterance``), never by the caller's reader."""
        room = rooms.take(self.service, "stream") if own_room else None
        try:
            decision = self.admission.admit(self, can_wait=can_wait)
        except ProtocolError:
            if room is not None:
                room.release()
            raise
        utterance = self.utterances.start(request, uid, partial(self.gate, after), prepare)
        if room is not None:
            room.on_release = utterance.cancel
            self._answer_rooms[id(utterance)] = room
        if decision == "queued":
            return Opened(utterance, True, self.admission.position(self), self.admission.max_wait_s)
        return Opened(utterance)

    async def gate(self, after: Utterance | None) -> None:
        """Before an answer is planned: the one before it planned, and a listener slot held (``server_busy``
        if none frees in time)."""
        if after is not None:
            await after.planned()
        await self.admission.wait(self)
        if not self.admission.holds(self):
            raise self.admission.busy("this listener's wait for a slot ran out")

    def done(self, utterance: Utterance) -> None:
        """The answer is over, however it ended: its own room, if it took one, goes back."""
        self.utterances.done(utterance)
        if (room := self._answer_rooms.pop(id(utterance), None)) is not None:
            room.release()

    def idle(self) -> None:
        """No answer is open: the slot goes unless the next answer comes (``Admission.idle``)."""
        self.admission.idle(self)

    async def take_turn(self, told: Callable[[], None]) -> None:
        """At a piece's end, a turn past its hold while others wait is handed over (``told`` first) and waits
        again; ``server_busy`` if it cannot come back."""
        await self.admission.take_turn(self, told)

    def waiting(self) -> tuple[int, float]:
        """(place in the queue, how long a handed-over turn may wait): what a wire tells a listener whose
        turn went to another."""
        return self.admission.position(self), self.admission.max_hold_s + self.admission.max_wait_s

    def leave(self) -> None:
        """Gone (the connection closed, the answer's body ended, or the request failed): its answers stop,
        its slot (held or waited for) and its rooms are given back. Safe to call twice."""
        if self._left:
            return
        self._left = True
        self.utterances.cancel()
        self.admission.leave(self)
        for room in [*self._rooms, *self._answer_rooms.values()]:
            room.release()
        self._answer_rooms.clear()
        self.service.answers.discard(self)

    # -- what admission and the slowdown watch read (``core.listener``) -------------------------------
    @property
    def lane(self) -> Lane:
        return self.utterances.lane

    def speaking_until(self) -> float:
        """When (monotonic) the audio of every open answer will have played, as far as can be told now."""
        open_ = [_Queued(u.request, u, u.first_audio_at) for u in self.utterances.open]
        return speech_ends(open_, self.utterances.lane.play_end, time.monotonic())

    def shed(self, error: ProtocolError) -> None:
        """The machine slowed down and this listener is the newest (or its key was revoked): each answer ends
        with ``error`` (told in its wire's shape), no more of their audio is sent."""
        for utterance in list(self.utterances.open):
            utterance.fail(error.naming(id=utterance.id))
        self.utterances.restart()
