"""The client outlives its server: drains, drops and refusals become a short pause, never a lost message."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from streamvoice.client import AudioChunk, SpeechClient
from streamvoice.client.resilience import Reconnect, should_reconnect
from streamvoice.client.transports import Transport, TransportClosed, WebSocketTransport
from streamvoice.engine import KokoroEngine
from tests.helpers import RunningServer, start_speech_server

LONG = " ".join(["The courier left the depot at nine and will reach your street before noon."] * 3)
FAST = Reconnect(attempts=3, base_delay_s=0.02, max_delay_s=0.1)


def test_backoff_is_jittered_and_bounded() -> None:
    policy = Reconnect(base_delay_s=0.1, max_delay_s=1.0)
    rng = random.Random(7)
    assert policy.delay(0) == 0.0
    delays = [policy.delay(n, rng) for n in range(1, 10) for _ in range(20)]
    assert all(0 <= d <= 1.0 for d in delays) and len(set(delays)) > 100  # jittered, never past the cap
    assert max(policy.delay(1, rng) for _ in range(50)) <= 0.2


@pytest.mark.parametrize(
    ("code", "refused", "unanswered", "expected"),
    [
        (1001, False, 0, True),  # drained while idle: keep the session alive elsewhere
        (1006, False, 2, True),  # dropped
        (1013, False, 1, True),  # try again later
        (1000, True, 0, True),  # refused with server_busy
        (1000, False, 0, False),  # our own close
        (1008, False, 1, False),  # policy (bad token, stopped reading): retrying repeats it
        (None, False, 1, True),  # a transport without codes, messages owed
    ],
)
def test_when_to_reconnect(code: int | None, refused: bool, unanswered: int, expected: bool) -> None:
    assert should_reconnect(code, refused, unanswered) is expected


@pytest.fixture
def two_servers(scripted: KokoroEngine) -> Iterator[tuple[RunningServer, RunningServer]]:
    """Two replicas over the scripted engine: what is resent, restarted or answered once is the client's
    and the drain's (the model's sound plays no part)."""
    a = start_speech_server(scripted, warm_up=False, drain_timeout_s=30)
    b = start_speech_server(scripted, warm_up=False)
    yield a, b
    a.stop()
    b.stop()


def dial_in_turn(*urls: str) -> Any:
    """The load balancer, played by hand: each new session goes to the next URL (the last one repeats)."""
    queue = list(urls)

    async def dial() -> Transport:
        url = queue.pop(0) if len(queue) > 1 else queue[0]
        return await WebSocketTransport.connect(url)

    return dial


async def answers(
    client: SpeechClient, ids: set[str]
) -> tuple[Counter[str], list[dict[str, Any]], dict[str, int]]:
    """Answers per id, the reconnected events, and audio bytes per id, until every id is answered."""
    answered: Counter[str] = Counter()
    reconnected: list[dict[str, Any]] = []
    audio: Counter[str] = Counter()
    async for event in client.events():
        if isinstance(event, AudioChunk):
            audio[event.id or ""] += len(event.data)
            continue
        if event.type == "reconnected":
            reconnected.append(event.payload)
        if event.type in ("synthesis_complete", "error") and event.payload.get("id") in ids:
            answered[event.payload["id"]] += 1
            assert event.type == "synthesis_complete", event.payload
        if set(answered) == ids:
            break
    return answered, reconnected, dict(audio)


@pytest.mark.slow
async def test_a_drain_mid_answer_moves_the_rest_to_another_replica(
    two_servers: tuple[RunningServer, RunningServer],
) -> None:
    a, b = two_servers
    dial = dial_in_turn(a.url, b.url)
    client = SpeechClient(await dial(), dial, FAST)
    await client.synthesize(LONG, id="m1")
    reader = asyncio.create_task(answers(client, {"m1", "m2", "m3"}))
    while a.drainer.app.state.service.rooms.sessions == 0 or not _audio_started(a):
        await asyncio.sleep(0.02)
    a.drainer.request_shutdown()  # SIGTERM mid-answer
    while not a.drainer.app.state.service.draining:
        await asyncio.sleep(0.01)
    await client.synthesize("Then a second message.", id="m2")  # answered going_away by a: re-sent
    await client.synthesize("And a third.", id="m3")
    answered, reconnected, audio = await asyncio.wait_for(reader, 120)
    await client.aclose()
    assert answered == Counter({"m1": 1, "m2": 1, "m3": 1})  # nothing lost, nothing answered twice
    assert reconnected == [{"type": "reconnected", "resent": ["m2", "m3"], "restarted": []}]
    assert audio["m1"] / 2 / 24_000 > 8.0  # m1 finished on the draining replica, whole
    assert audio["m2"] > 0 and audio["m3"] > 0  # spoken by the other replica


def _audio_started(server: RunningServer) -> bool:
    return any(s.busy for s in server.drainer.app.state.service.connections)


async def test_a_full_server_is_retried_with_backoff(scripted: KokoroEngine) -> None:
    server = start_speech_server(scripted, warm_up=False, max_sessions=1)
    try:
        holder = await SpeechClient.connect(server.url, reconnect=None)
        patient = await SpeechClient.connect(server.url, reconnect=Reconnect(attempts=8, base_delay_s=0.05))
        await patient.synthesize("Hello once the line is free.", id="p1")
        release = asyncio.get_running_loop().call_later(0.4, lambda: asyncio.ensure_future(holder.aclose()))
        answered, reconnected, _ = await asyncio.wait_for(answers(patient, {"p1"}), 60)
        release.cancel()
        assert answered == Counter({"p1": 1}) and reconnected and patient.reconnects >= 1
        await patient.aclose()
    finally:
        server.stop()


async def test_every_message_is_answered_when_no_replica_comes_back(scripted: KokoroEngine) -> None:
    server = start_speech_server(scripted, warm_up=False)
    dial = dial_in_turn(server.url)
    client = SpeechClient(await dial(), dial, FAST)
    server.drainer.request_shutdown()
    while not server.drainer.app.state.service.draining:
        await asyncio.sleep(0.01)
    await client.synthesize("Nobody will say this.", id="x1")
    events = []
    async for event in client.events():
        if not isinstance(event, AudioChunk):
            events.append(event.payload)
    server.stop()
    assert [(e["type"], e.get("id"), e.get("code")) for e in events] == [("error", "x1", "closed")]
    assert "reconnects failed" in events[0]["message"]


async def test_a_server_that_drops_the_handshake_is_a_failed_dial_not_a_crash() -> None:
    """A replica going away may close a socket before it answers the upgrade: the dial fails as a closed
    transport (a reconnect counts it and tries again), never websockets' own ``InvalidMessage`` escaping the
    client's event loop (seen once in the suite under load)."""

    async def drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.close()

    server = await asyncio.start_server(drop, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(TransportClosed, match="before the session opened"):
            await WebSocketTransport.connect(f"ws://127.0.0.1:{port}")
    finally:
        server.close()
        await server.wait_closed()
