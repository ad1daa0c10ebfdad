"""``server.core.rooms``: whether there is room for new work, the one answer every surface asks for, and the
room each caller's seat holds (the session cap; with its listener slot, given back together)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from streamvoice.agent.llm import ScriptedTextSource
from streamvoice.engine import KokoroEngine
from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.config import ServerConfig
from streamvoice.server.core.requests import SessionDefaults
from streamvoice.server.core.rooms import take, unavailable
from streamvoice.server.core.seat import Seat
from streamvoice.server.core.service import SpeechService
from tests.helpers import (
    RunningServer,
    agent_turns,
    metric,
    start_agent,
    start_speech_server,
    wait_for,
)


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
    first, second = take(service, "stream"), take(service, "session")
    assert service.rooms.streams == 1 and service.rooms.sessions == 1
    with pytest.raises(ProtocolError) as full:
        take(service, "stream")
    assert full.value.code == ErrorCode.SERVER_BUSY
    assert unavailable(service, new_work=False) is None  # /ping stays healthy while full
    first.release()
    first.release()
    assert service.rooms.streams == 0 and not first.held and second.held
    take(service, "stream").release()
    second.release()
    assert service.rooms.sessions == 0


async def test_a_seat_takes_a_listener_slot_and_leaving_gives_back_both(service: SpeechService) -> None:
    request = service.requests.resolve(SessionDefaults(), "af_heart")
    first = Seat.alone(service)
    first.open(request, None, None, can_wait=False)
    assert service.admission.admitted == 1 and service.rooms.streams == 1
    second = Seat.alone(service)
    with pytest.raises(ProtocolError) as busy:
        second.open(request, None, None, can_wait=False)
    assert busy.value.code == ErrorCode.SERVER_BUSY and second.utterances.open == []
    second.leave()
    first.leave()
    assert service.admission.admitted == 0 and service.rooms.streams == 0 and not service.answers


# --- 24. the session cap holds for simultaneous requests, and the agent's turn cap too ------------------------


async def test_simultaneous_requests_respect_the_caps(
    busy_scripted: KokoroEngine, scripted_server: RunningServer
) -> None:
    # The session cap alone (admission, on by default, would turn callers away before it: test_admission).
    server = await asyncio.to_thread(
        start_speech_server, busy_scripted, warm_up=False, max_sessions=4, admission="off"
    )
    try:
        async with httpx.AsyncClient(timeout=120) as client:
            for path, body in (
                ("/v1/audio/speech", {"input": "Twelve of us at once.", "response_format": "pcm"}),
                ("/invocations", {"text": "Twelve of us at once."}),
                ("/dev/captioned_speech", {"input": "Twelve of us at once.", "stream": False}),
            ):
                answers = await asyncio.gather(
                    *(client.post(server.url + path, json=body) for _ in range(12))
                )
                codes = sorted(r.status_code for r in answers)
                assert codes.count(200) == 4 and codes.count(503) == 8, (path, codes)
                assert {r.json()["error"]["code"] for r in answers if r.status_code == 503} == {"server_busy"}
                await wait_for(lambda: metric(server, "streamvoice_active_streams") == 0)
    finally:
        await asyncio.to_thread(server.stop)
    # Each admitted turn lasts seconds (its LLM's first token comes after 2 s), so all eight requests
    # arrive while the first two are held: a turn that ended at once could free its place for a ninth.
    slow = ScriptedTextSource("One two three four five.", ttft_s=2.0)
    agent = await asyncio.to_thread(start_agent, slow, scripted_server.url, max_concurrent_turns=2)
    try:
        async with httpx.AsyncClient(timeout=60) as client:
            answers = await asyncio.gather(
                *(client.post(agent.url + "/invocations", json={"prompt": "hi"}) for _ in range(8))
            )
        # what counts is that only two were admitted (8 of 8 ran with a limit of 2)
        assert sorted(r.status_code for r in answers).count(503) == 6
        # released when each response ends, on the agent's side: a moment after the client has read it
        await wait_for(lambda: agent_turns(agent) == 0)
    finally:
        await asyncio.to_thread(agent.stop)
