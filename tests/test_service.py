"""``server.service``: what exists once per process (planning, load, admission, the drain), shared by every
surface: a text's model calls come in speaking order, a break in SSML lands after its piece, and a drain
reaches every open session."""

from __future__ import annotations

import pytest

from streamvoice.engine import KokoroEngine
from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.config import ServerConfig
from streamvoice.server.core.requests import SessionDefaults
from streamvoice.server.core.service import SpeechService


@pytest.fixture
def service(engine: KokoroEngine) -> SpeechService:
    return SpeechService(engine, ServerConfig(warm_up=False))


async def test_a_text_is_planned_into_pieces_in_speaking_order(service: SpeechService) -> None:
    text = "First we plan. Then, when it is ready, we speak! And at last we stop."
    request = service.requests.resolve(SessionDefaults(), text=text)
    pieces = [piece async for piece in service.plan(request)]
    assert len(pieces) >= 2 and " ".join(p.text for p in pieces).split() == text.split()
    assert service.load.planning == 0  # counted only while planning runs


async def test_a_break_is_the_pause_after_its_piece(service: SpeechService) -> None:
    request = service.requests.resolve(
        SessionDefaults(), text='<speak>Wait.<break time="700ms"/>Now go.</speak>'
    )
    pieces = [piece async for piece in service.plan(request)]
    assert [p.pause_ms for p in pieces] == [700, None]


async def test_markup_and_unreadable_text_are_refused_with_their_codes(service: SpeechService) -> None:
    bad_ssml = service.requests.resolve(SessionDefaults(), text="<speak>Unclosed <emphasis>tag</speak>")
    with pytest.raises(ProtocolError) as caught:
        [p async for p in service.plan(bad_ssml)]
    assert caught.value.code is ErrorCode.INVALID_SSML


def test_a_drain_reaches_every_open_session(service: SpeechService) -> None:
    class Session:
        drained = False

        def drain(self) -> None:
            self.drained = True

    sessions = [Session(), Session()]
    service.connections.update(sessions)
    service.begin_drain()
    assert service.draining and all(s.drained for s in sessions)
