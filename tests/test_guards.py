"""Who may start work and whether there is room: the one answer every surface asks for."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streamvoice.engine.kokoro import KokoroEngine
from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.config import ServerConfig
from streamvoice.server.guards import reserve, unavailable
from streamvoice.server.service import SpeechService


@pytest.fixture
def service(engine: KokoroEngine) -> Iterator[SpeechService]:
    service = SpeechService(engine, ServerConfig(max_sessions=2, admission="refuse", admission_listeners=1))
    service.ready = True
    yield service
    service.stop()


def test_the_reasons_come_in_order_draining_then_loading_then_full(service: SpeechService) -> None:
    assert unavailable(service) is None
    service.ready = False
    assert (problem := unavailable(service)) is not None and problem.code == ErrorCode.NOT_READY
    service.draining = True
    assert (problem := unavailable(service)) is not None and problem.code == ErrorCode.GOING_AWAY
    assert (problem := unavailable(None)) is not None and problem.code == ErrorCode.NOT_READY


def test_the_cap_counts_from_the_reservation_and_a_release_twice_gives_back_once(
    service: SpeechService,
) -> None:
    first, second = reserve(service), reserve(service, "session")
    assert service.metrics.active_streams == 1 and service.metrics.active_sessions == 1
    with pytest.raises(ProtocolError) as full:
        reserve(service)
    assert full.value.code == ErrorCode.SERVER_BUSY
    assert unavailable(service, new_work=False) is None  # /ping stays healthy while full
    first.release()
    first.release()
    assert service.metrics.active_streams == 0 and not first.held and second.held
    reserve(service).release()
    second.release()
    assert service.metrics.active_sessions == 0


async def test_a_slot_takes_a_listener_slot_and_its_release_gives_back_both(service: SpeechService) -> None:
    first = reserve(service)
    first.admit()
    assert service.admission.admitted == 1
    second = reserve(service)
    with pytest.raises(ProtocolError) as busy:
        second.admit()
    assert busy.value.code == ErrorCode.SERVER_BUSY
    second.release()
    first.release()
    assert service.admission.admitted == 0
