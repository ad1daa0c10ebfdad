"""A caller's room in the server: the session cap and the listener slot it holds, and why new work cannot
start now. One answer for every surface (the session protocol, HTTP, the vendor wires and Wyoming), so limits
never drift apart; free of any transport, so a surface on a raw socket (Wyoming) uses it as the web ones do."""

from __future__ import annotations

import time
from dataclasses import dataclass

from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.lane import Lane
from streamvoice.server.core.requests import ResolvedRequest, speech_ends
from streamvoice.server.core.service import SpeechService
from streamvoice.server.core.utterance import Utterance


def unavailable(service: SpeechService | None, new_work: bool = True) -> ProtocolError | None:
    """Why the server cannot take this now: shutting down, still loading, or (for new work) full."""
    if service is not None and service.draining:
        return ProtocolError(ErrorCode.GOING_AWAY, "the server is shutting down; retry on another instance")
    if service is None or not service.ready:
        return ProtocolError(ErrorCode.NOT_READY, "model is loading or warming up; retry after /ping is 200")
    metrics, cap = service.metrics, service.config.max_sessions
    if new_work and metrics.active_sessions + metrics.active_streams >= cap:
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

    def __init__(self, service: SpeechService, kind: str) -> None:
        self.service = service
        self.kind = kind  # "session" or "stream": which gauge counts it
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
        decision = admission.enter(self, can_wait=False)
        if decision == "refused":
            raise admission.busy("no listener slot is free")
        if decision == "queued":
            await admission.wait(self)

    def release(self) -> None:
        if not self._held:
            return
        self._held = False
        self._count(-1)
        self.service.admission.leave(self)

    def _count(self, delta: int) -> None:
        metrics = self.service.metrics
        if self.kind == "session":
            metrics.active_sessions += delta
        else:
            metrics.active_streams += delta


def reserve(service: SpeechService | None, kind: str = "stream") -> Slot:
    """Room for new work now, or the reason there is none (``unavailable``), as a ``ProtocolError``.

    The check and the count happen with no ``await`` between them: on one event loop that makes the cap
    exact however many callers arrive at once."""
    if (problem := unavailable(service)) is not None:
        raise problem
    assert service is not None
    return Slot(service, kind)
