"""A listener's seat on a connection: its queue of answers (``Utterances``, over its lane) and its listener
slot, with one ``open`` that refuses, admits and starts an answer, and one ``leave``.

Every socket wire opens an answer the same way, so the order is written once here: the slot (held, taken,
waited for, or ``server_busy`` at once), then the utterance behind the answer before it. Before it plans,
the utterance waits in ``gate``: the answer before it planned (one planner per connection, in answer order,
so deadlines follow speaking order and one client cannot occupy the planning thread), then the slot held.
Checked by ``pytest tests/test_seat.py`` and every wire's tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from streamvoice.server.core.admission import Admission
from streamvoice.server.core.listener import Listener
from streamvoice.server.core.requests import ResolvedRequest
from streamvoice.server.core.utterance import Utterance
from streamvoice.server.core.utterances import Utterances


@dataclass(frozen=True)
class Opened:
    """An answer started: its utterance, and whether it waits for a listener slot (``queued``: its place
    and how long it may wait, for the wire to tell)."""

    utterance: Utterance
    queued: bool = False
    position: int = 0
    max_wait_s: float = 0.0


class Seat:
    """One listener's answers and slot. ``who`` is the listener as admission counts it (the connection)."""

    def __init__(self, admission: Admission[Listener], utterances: Utterances, who: Listener) -> None:
        self.admission = admission
        self.utterances = utterances
        self.who = who

    def open(
        self, request: ResolvedRequest, uid: str | None, after: Utterance | None, can_wait: bool = True
    ) -> Opened:
        """Admit the listener and start an answer behind ``after`` (the answer opened before it, if still
        open); ``server_busy`` raised before anything starts. ``can_wait`` False: a wire that cannot tell a
        caller it waits (no "queued" in it) is admitted or refused at once."""
        decision = self.admission.admit(self.who, can_wait=can_wait)
        utterance = self.utterances.start(request, uid, gate=partial(self.gate, after))
        if decision == "queued":
            return Opened(utterance, True, self.admission.position(self.who), self.admission.max_wait_s)
        return Opened(utterance)

    async def gate(self, after: Utterance | None) -> None:
        """Before an answer is planned: the one before it planned, and a listener slot held (``server_busy``
        if none frees in time)."""
        if after is not None:
            await after.planned()
        await self.admission.wait(self.who)
        if not self.admission.holds(self.who):
            raise self.admission.busy("this connection's wait for a listener slot ran out")

    def idle(self) -> None:
        """No answer is open: the slot goes unless the next answer comes (``Admission.idle``)."""
        self.admission.idle(self.who)

    async def take_turn(self, told: Callable[[], None]) -> None:
        """At a piece's end, a turn past its hold while others wait is handed over (``told`` first) and waits
        again; ``server_busy`` if it cannot come back."""
        await self.admission.take_turn(self.who, told)

    def waiting(self) -> tuple[int, float]:
        """(place in the queue, how long a handed-over turn may wait): what a wire tells a listener whose
        turn went to another."""
        return self.admission.position(self.who), self.admission.max_hold_s + self.admission.max_wait_s

    def leave(self) -> None:
        """The connection is gone: its slot, held or waited for, is given back."""
        self.admission.leave(self.who)
