"""A caller's room in the server: the session cap and the listener slot it holds, and why new work cannot
start now. One answer for every surface (the session protocol, HTTP, the vendor wires and raw sockets), so limits
never drift apart; free of any transport, so a surface on a raw TCP socket uses it as the web ones do."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.lane import Lane
from streamvoice.server.core.requests import ResolvedRequest, speech_ends
from streamvoice.server.core.service import SpeechService
from streamvoice.server.core.tenancy import current
from streamvoice.server.core.utterance import Utterance
from streamvoice.store.keys import Tenant

log = logging.getLogger("streamvoice.server")


def unavailable(service: SpeechService | None, new_work: bool = True) -> ProtocolError | None:
    """Why the server cannot take this now: shutting down, still loading, or (for new work) full."""
    if service is not None and service.draining:
        return ProtocolError(ErrorCode.GOING_AWAY, "the server is shutting down; retry on another instance")
    if service is None or not service.ready:
        return ProtocolError(ErrorCode.NOT_READY, "model is loading or warming up; retry after /ping is 200")
    cap = service.config.max_sessions
    if new_work and service.rooms.taken >= cap:
        return ProtocolError(
            ErrorCode.SERVER_BUSY, f"the server holds {cap} sessions and streams; retry later"
        )
    return None


@dataclass(frozen=True)
class _Asked:
    """An HTTP answer as ``requests.speech_ends`` reads a queued one, counted from when it was asked."""

    request: ResolvedRequest
    utterance: Utterance
    first_audio_at: float


class Slot:
    """A caller's room in the server, held from the moment it is asked for until ``release``.

    Counted against ``max_sessions`` when reserved, before any body is parsed or audio made, so callers
    arriving together cannot all pass the check before any of them is counted
    (``test_simultaneous_requests_respect_the_caps``). It is also the key of the
    listener slot it takes in admission, so one ``release`` gives back both, and releasing twice is safe:
    every surface calls it in a ``finally`` and again from its stream's close.
    """

    # An HTTP answer keeps its slot to its end: it is one request, bounded by ``MAX_TEXT_CHARS``, whose body
    # cannot be paused for another listener's turn without a silence its player cannot be told of. A socket
    # that never pauses hands its slot over (``Connection._take_turns``); admission's retry hint counts to
    # this one's end (``tests/test_admission.py::test_a_retry_hint_counts_an_http_answer_to_its_end``).
    hands_over = False

    def __init__(self, service: SpeechService, kind: str, tenant: Tenant | None = None) -> None:
        self.service = service
        self.kind = kind  # "session" or "stream": which room it counts in (``service.rooms``)
        self.tenant = tenant  # whose share it counts in (``tenancy.Tenancy.take``, made before this)
        self.lease = uuid.uuid4().hex  # its tenant's lease in the store, if the tenant is capped (``claim``)
        self.utterance: Utterance | None = (
            None  # the answer it streams (``watch`` reads its lane, may shed it)
        )
        self._since = time.monotonic()
        self._held = True
        self._count(+1)

    def speaking_until(self) -> float:
        """When (monotonic) its answer will have played: what is decoded, or, if later, its text's estimated
        speech less the time since it was asked (an answer not yet begun counts whole)."""
        now = time.monotonic()
        if self.utterance is None:
            return now
        utterance = self.utterance
        return speech_ends([_Asked(utterance.request, utterance, self._since)], utterance.lane.play_end, now)

    @property
    def held(self) -> bool:
        return self._held

    async def claim(self) -> None:
        """Its tenant's share across every replica (``Tenancy.claim``): ``concurrent_limit_exceeded`` when
        the tenant's cap is taken elsewhere; the caller releases the slot then, as on any refusal."""
        await self.service.tenancy.claim(self.tenant, self.lease)
        if not self._held:  # released while the store answered: the lease goes too
            self.service.tenancy.drop_lease(self.lease)

    @property
    def lane(self) -> Lane | None:
        return self.utterance.lane if self.utterance is not None else None

    def shed(self, error: ProtocolError) -> None:
        """The machine slowed down and this answer is the newest: it ends now (an HTTP body already begun
        cannot carry an error: it stops short; SSE and NDJSON bodies end with the error event)."""
        if self.utterance is not None:
            self.utterance.fail(error)

    async def admit(self) -> None:
        """A listener slot for this caller (who cannot be told it waits): now, or once a slot known to free
        within the admission wait has freed; else ``server_busy`` at once (the room is kept; release gives it
        back). A one-shot answer right after a listener's speech ended is served, never refused while the
        server is idle (``tests/test_admission.py``)."""
        admission = self.service.admission
        if admission.admit(self, can_wait=False) == "queued":
            await admission.wait(self)

    def release(self) -> None:
        if not self._held:
            return
        self._held = False
        self._count(-1)
        self.service.tenancy.give(self.tenant, self.lease)
        self.service.admission.leave(self)

    def _count(self, delta: int) -> None:
        rooms = self.service.rooms
        if self.kind == "session":
            rooms.sessions += delta
        elif delta > 0:
            rooms.answers.add(self)
        else:
            rooms.answers.discard(self)


class Holdings:
    """Every slot reserved while one request or connection is served: the one owner of their lifetime.

    A surface gives its slot back where its answer ends; whatever it did not give back (an exception at any
    step after the reservation, a client gone, a cancelled task) is given back here when the request or
    connection ends, its answer stopped. A response header that failed to encode after the slot and the
    synthesis were taken kept both for good, and every later caller was refused (issue #47); now no path
    out of a request can keep a slot (``tests/test_holdings.py`` injects a failure at each step)."""

    def __init__(self) -> None:
        self.slots: list[Slot] = []

    def release_all(self) -> int:
        """Give back what is still held, its answer stopped; how many were."""
        kept = [slot for slot in self.slots if slot.held]
        for slot in kept:
            if slot.utterance is not None:
                slot.utterance.cancel()
            slot.release()
        self.slots.clear()
        return len(kept)


_HOLDINGS: contextvars.ContextVar[Holdings | None] = contextvars.ContextVar("holdings", default=None)


@contextlib.contextmanager
def holding(what: str) -> Iterator[Holdings]:
    """Serve one request or connection (``what``, for the log) owning every slot reserved inside it, in any
    task it starts: each is given back when this ends, however it ends."""
    holdings = Holdings()
    token = _HOLDINGS.set(holdings)
    try:
        yield holdings
    finally:
        _HOLDINGS.reset(token)
        if (kept := holdings.release_all()) > 0:
            log.warning(
                "%s ended holding %d slot(s) its surface did not give back: given back now", what, kept
            )


def reserve(service: SpeechService | None, kind: str = "stream") -> Slot:
    """Room for new work now, or the reason there is none (``unavailable``, or the tenant's own share
    taken: ``concurrent_limit_exceeded``), as a ``ProtocolError``; owned by the request or connection being
    served (``holding``), which gives it back if nothing else does.

    The checks and the counts happen with no ``await`` between them: on one event loop that makes the caps
    exact however many callers arrive at once."""
    tenant = current()
    if (problem := unavailable(service)) is not None:
        if service is not None:
            service.tenancy.refused(tenant, problem.code)
        raise problem
    assert service is not None
    service.tenancy.take(tenant)
    slot = Slot(service, kind, tenant)
    if (holdings := _HOLDINGS.get()) is not None:
        holdings.slots.append(slot)
    return slot
