"""A caller's room in the server: a place under ``MAX_SESSIONS`` and in its tenant's share, and why new work
cannot start now. Taken only through a seat (``core.seat``), the one place a caller is refused, admitted and
given everything back; free of any transport, so a raw TCP wire uses it as the web ones do. Checked by
``pytest tests/test_seat.py tests/test_holdings.py``."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import uuid
from collections.abc import Callable, Iterator
from typing import Literal

from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.service import SpeechService
from streamvoice.server.core.tenancy import current
from streamvoice.store.keys import Tenant

log = logging.getLogger("streamvoice.server")

# A socket for its life, or one answer (an HTTP body, a raw socket's utterance).
Kind = Literal["session", "stream"]


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


class Room:
    """A place under ``max_sessions``, held from the moment it is asked for until ``release``.

    Counted when taken, before any body is parsed or audio made, so callers arriving together cannot all pass
    the check before any of them is counted (``test_simultaneous_requests_respect_the_caps``). Releasing twice
    is safe: its seat gives it back on every path out, and the request's ``Holdings`` again if it did not.
    """

    def __init__(self, service: SpeechService, kind: Kind, tenant: Tenant | None) -> None:
        self.service = service
        self.kind = kind
        self.tenant = tenant  # whose share it counts in (``tenancy.Tenancy.take``, made before this)
        self.lease = uuid.uuid4().hex  # its tenant's lease in the store, if the tenant is capped (``claim``)
        self.on_release: Callable[[], None] | None = None  # its seat's way out (``Holdings`` calls it)
        self._held = True
        self._count(+1)

    @property
    def held(self) -> bool:
        return self._held

    async def claim(self) -> None:
        """Its tenant's share across every replica (``Tenancy.claim``): ``concurrent_limit_exceeded`` when
        the tenant's cap is taken elsewhere; the caller releases the room then, as on any refusal."""
        await self.service.tenancy.claim(self.tenant, self.lease)
        if not self._held:  # released while the store answered: the lease goes too
            self.service.tenancy.drop_lease(self.lease)

    def release(self) -> None:
        if not self._held:
            return
        self._held = False
        self._count(-1)
        self.service.tenancy.give(self.tenant, self.lease)

    def _count(self, delta: int) -> None:
        rooms = self.service.rooms
        if self.kind == "session":
            rooms.sessions += delta
        else:
            rooms.streams += delta


class Holdings:
    """Every room taken while one request or connection is served: the one owner of their lifetime.

    A seat gives its rooms back where its answers end; whatever it did not give back (an exception at any
    step after the reservation, a client gone, a cancelled task) is given back here when the request or
    connection ends, its seat's answers stopped. A response header that failed to encode after the room and
    the synthesis were taken kept both for good, and every later caller was refused (issue #47); now no path
    out of a request can keep a room (``tests/test_holdings.py`` injects a failure at each step)."""

    def __init__(self) -> None:
        self.rooms: list[Room] = []

    def release_all(self) -> int:
        """Give back what is still held (through its seat, which stops its answers); how many were."""
        kept = [room for room in self.rooms if room.held]
        for room in kept:
            if room.on_release is not None:
                room.on_release()
            room.release()
        self.rooms.clear()
        return len(kept)


_HOLDINGS: contextvars.ContextVar[Holdings | None] = contextvars.ContextVar("holdings", default=None)


@contextlib.contextmanager
def holding(what: str) -> Iterator[Holdings]:
    """Serve one request or connection (``what``, for the log) owning every room taken inside it, in any
    task it starts: each is given back when this ends, however it ends."""
    holdings = Holdings()
    token = _HOLDINGS.set(holdings)
    try:
        yield holdings
    finally:
        _HOLDINGS.reset(token)
        if (kept := holdings.release_all()) > 0:
            log.warning("%s ended holding %d room(s) its seat did not give back: given back now", what, kept)


def take(service: SpeechService | None, kind: Kind) -> Room:
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
    room = Room(service, kind, tenant)
    if (holdings := _HOLDINGS.get()) is not None:
        holdings.rooms.append(room)
    return room
