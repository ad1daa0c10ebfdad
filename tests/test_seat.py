"""``core.seat``: a listener's answers opened one way (the slot, then the utterance, behind the one before
it), refused before anything starts, queued with its place, and everything given back on the way out."""

from __future__ import annotations

import asyncio
import time
from typing import cast

import numpy as np
import pytest

from streamvoice.engine.voices import VoiceSpec
from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.admission import Admission
from streamvoice.server.core.events import Failed
from streamvoice.server.core.lane import Lane
from streamvoice.server.core.listener import Listener
from streamvoice.server.core.requests import ResolvedRequest
from streamvoice.server.core.seat import Seat
from streamvoice.server.core.service import SpeechService
from streamvoice.server.core.utterances import Utterances
from tests.fakes import FakeEngine, FakeHost, FakePieceSource


def _request(text: str) -> ResolvedRequest:
    return ResolvedRequest(
        text=text, voice=VoiceSpec((("af_heart", 1.0),)), speed=1.0, format="pcm", lang="en-us"
    )


class _Service:
    """What a seat asks of the service: admission, a listener's queue of answers, the HTTP answers' set."""

    def __init__(self, admission: Admission[Listener], host: FakeHost) -> None:
        self.admission = admission
        self.host = host
        self.answers: set[Listener] = set()

    def utterances(self) -> Utterances:
        return Utterances(FakePieceSource(), Lane(self.host))


def _seat(admission: Admission[Listener], host: FakeHost, on_connection: bool = True) -> Seat:
    return Seat(cast(SpeechService, _Service(admission, host)), on_connection)


async def test_answers_open_in_order_each_planned_after_the_one_before() -> None:
    host = FakeHost(engine=FakeEngine(windows_per_piece=1, window_samples=240))
    host.scheduler.start()
    admission: Admission[Listener] = Admission("queue", lambda: 1, max_wait_s=5.0)
    seat = _seat(admission, host)
    first = seat.open(_request("One. Two."), "a", None)
    second = seat.open(_request("Three."), "b", first.utterance)
    assert not first.queued and not second.queued and admission.holds(seat)
    second.utterance.say()  # said first, yet planned only once the answer before it is
    await asyncio.sleep(0.05)  # room for it to plan now, were it not gated
    source = seat.utterances.source
    assert isinstance(source, FakePieceSource) and source.planned == []
    first.utterance.say()
    kinds = []
    for utterance in (first.utterance, second.utterance):
        kinds.append(
            [type(e).__name__ async for e in utterance.events() if not isinstance(e, np.ndarray)][-1]
        )
    assert source.planned == ["One.", "Two.", "Three."] and kinds == ["Completed", "Completed"]
    seat.leave()
    assert not admission.holds(seat)
    host.scheduler.stop()


async def test_a_refused_open_starts_nothing_and_a_queued_one_says_its_place() -> None:
    host = FakeHost()
    admission: Admission[Listener] = Admission("queue", lambda: 1, queue_bound=1, max_wait_s=5.0)
    holder, waiter, third = _seat(admission, host), _seat(admission, host), _seat(admission, host)
    holder.open(_request("Mine."), "h", None)
    queued = waiter.open(_request("Next."), "w", None)
    assert queued.queued and queued.position == 1 and queued.max_wait_s == 5.0
    with pytest.raises(ProtocolError) as refused:
        third.open(_request("No room."), "t", None, can_wait=True)
    assert refused.value.code == ErrorCode.SERVER_BUSY and third.utterances.open == []
    # A wire that cannot say "queued" is admitted or refused at once.
    with pytest.raises(ProtocolError):
        _seat(admission, host).open(_request("Now or never."), None, None, can_wait=False)
    holder.leave()  # the slot goes to the one waiting
    await asyncio.wait_for(waiter.gate(None), 5)
    assert admission.holds(waiter)
    waiter.leave()
    assert not admission.holds(waiter) and admission.position(waiter) == 0


async def test_an_http_answers_seat_keeps_its_slot_is_revocable_and_sheds_its_answer() -> None:
    host = FakeHost()
    admission: Admission[Listener] = Admission("queue", lambda: 1, max_wait_s=5.0)
    service = _Service(admission, host)
    seat = Seat(cast(SpeechService, service), on_connection=False)
    assert not seat.hands_over and seat in service.answers  # stopped there when its key is revoked
    opened = seat.open(_request("An answer that takes a while to say."), "x", None, can_wait=False)
    opened.utterance.say()
    assert seat.speaking_until() > time.monotonic() + 1  # its text counts whole before its first audio
    seat.shed(ProtocolError(ErrorCode.SERVER_BUSY, "the machine slowed down"))
    events = [e async for e in opened.utterance.events() if not isinstance(e, np.ndarray)]
    assert isinstance(last := events[-1], Failed)
    assert last.error.code == ErrorCode.SERVER_BUSY and last.error.id == "x"
    seat.leave()
    seat.leave()  # twice is once
    assert seat not in service.answers and not admission.holds(seat) and seat.utterances.open[0].cancelled
