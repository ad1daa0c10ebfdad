"""Admission: one caller too many is told so at once (queued with a bound, or refused), and the listeners
already admitted keep their slots."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from streamvoice.engine import KokoroEngine
from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core import service as service_module
from streamvoice.server.core.admission import PIECE_S, Admission
from streamvoice.server.core.load import DecodeSpeed, measured_capacity
from streamvoice.server.core.tenancy import turn
from streamvoice.store.keys import Tenant
from tests.fakes import FakeListener
from tests.helpers import (
    RunningServer,
    metric,
    start_speech_server,
    wait_for,
)
from tests.helpers import answers as next_answers

SENTENCE = "The courier left the depot at nine and will reach your street before noon."
LONG = (SENTENCE + " ") * 3


def test_capacity_follows_the_measured_decoding_speed() -> None:
    # 0.85 of the workers' time, each listener costing its full windows plus 0.04 s/s for its pieces' starts.
    assert measured_capacity(1, 0.38) == 2  # the graph as exported on 2 cores (Intel Xeon): two kept fed
    assert measured_capacity(1, 0.40) == 1
    assert measured_capacity(1, 0.235) == 3  # the static-int8 decoder on 2 cores (AMD EPYC): three kept fed
    assert measured_capacity(1, 0.197) == 3  # the same machine, faster: four admitted were not kept fed
    assert measured_capacity(1, 0.33) == 2  # full windows on 2 cores (Intel Xeon): not three
    assert measured_capacity(2, 0.6) == 2  # two workers, each slower on shared cores
    assert measured_capacity(1, 2.0) == 1  # slower than real time: still serves one
    assert measured_capacity(4, 0.0) == 4


def test_decoding_speed_is_a_slow_audio_weighted_average() -> None:
    speed = DecodeSpeed(initial_rtf=1.0, horizon_s=30.0)
    for _ in range(100):  # 100 windows of 0.8 s at 0.4 s of work per second of audio
        speed.observe(0.32, 0.8)
    assert speed.rtf == pytest.approx(0.4, abs=0.01)
    speed.observe(0.5, 0.3)  # one slow, small window barely moves it
    assert speed.rtf < 0.43


async def test_slots_queue_and_refusals() -> None:
    admission = Admission("queue", lambda: 1, queue_bound=1, max_wait_s=2.0, idle_release_s=0.05)
    a, b, c = FakeListener(), FakeListener(), FakeListener()
    assert admission.enter(a) == "admitted"
    assert admission.enter(b) == "queued" and admission.position(b) == 1
    assert admission.enter(c) == "refused"
    assert (admission.capacity, admission.admitted, admission.queued, admission.headroom) == (1, 1, 1, -1)
    waiting = asyncio.create_task(admission.wait(b))
    admission.idle(a)  # a's answer ended; its slot goes after the idle release
    await waiting
    assert admission.holds(b) and not admission.holds(a)
    assert admission.enter(c, can_wait=False) == "refused"
    assert admission.enter(a) == "queued"
    with pytest.raises(ProtocolError) as info:
        await admission.wait(a)  # b keeps its slot: a's wait runs out
    assert info.value.code == ErrorCode.SERVER_BUSY and "retry in about" in info.value.message
    admission.leave(b)
    assert admission.admitted == 0 and admission.refused == 3


async def test_when_the_machine_is_full_a_tenant_below_its_share_is_admitted_first() -> None:
    """Issue #67: one tenant queueing many listeners cannot keep another out. Of those waiting when a slot
    frees, the tenant furthest below its share goes first (arrival order among equals)."""
    acme, beta = Tenant("acme", "o1", "d1"), Tenant("beta", "o2", "d2", listeners=2)

    def turn_of(who: FakeListener) -> float:
        holding, waiting = [h.tenant for h in admission.holders], [w.tenant for w in admission.waiting]
        return turn(who.tenant, holding, waiting, admission.capacity)

    admission = Admission("queue", lambda: 3, queue_bound=8, max_wait_s=5.0, turn=turn_of)
    held = [FakeListener(tenant=acme) for _ in range(3)]
    for listener in held:
        assert admission.enter(listener) == "admitted"
    late = [FakeListener(tenant=acme), FakeListener(tenant=acme), FakeListener(tenant=beta)]
    for listener in late:
        assert admission.enter(listener) == "queued"
    admission.leave(held[0])
    assert admission.holds(late[2]) and not admission.holds(late[0])  # beta arrived last, holds nothing
    admission.leave(held[1])
    assert admission.holds(late[0])  # acme again, in its arrival order, once beta holds its fair part
    admission.leave(held[2])
    assert admission.holds(late[1])
    for listener in [*late]:
        admission.leave(listener)


async def test_a_caller_that_cannot_wait_is_served_when_the_slot_frees_in_time() -> None:
    """LiveKit's Cartesia and Deepgram plugins call synthesize() (one-shot HTTP) right after a stream(): the
    only slot is held by a listener whose speech has ended. Refused 503 before, with the server idle."""
    admission = Admission("queue", lambda: 1, max_wait_s=5.0, idle_release_s=0.05)
    now = asyncio.get_running_loop().time()
    ended = FakeListener(until=now)
    assert admission.enter(ended) == "admitted"
    http = FakeListener()
    assert admission.enter(http, can_wait=False) == "queued"  # frees within the wait: it waits
    admission.idle(ended)
    await admission.wait(http)
    assert admission.holds(http) and not admission.holds(ended)
    admission.leave(http)
    talking = FakeListener(until=now + 60.0)  # a minute still to say: cannot free within the wait
    assert admission.enter(talking) == "admitted"
    assert admission.enter(FakeListener(), can_wait=False) == "refused"


async def test_a_speaker_keeps_its_slot_between_sentences() -> None:
    admission = Admission("refuse", lambda: 1, idle_release_s=0.2)
    a, b = FakeListener(), FakeListener()
    assert admission.enter(a) == "admitted"
    admission.idle(a)
    assert admission.enter(a) == "admitted"  # the next sentence came within the release time
    admission.idle(a)
    assert admission.enter(b) == "refused"
    await wait_for(lambda: admission.admitted == 0)  # the release ran out
    assert admission.enter(b) == "admitted"


def _one_listener_server(engine: KokoroEngine, wait_s: float) -> RunningServer:
    """One listener slot, one place in the queue, ``wait_s`` for it, a short idle release."""
    return start_speech_server(
        engine,
        warm_up=False,
        admission="queue",
        admission_listeners=1,
        admission_queue=1,
        admission_wait_s=wait_s,
        admission_idle_s=0.3,
    )


@pytest.fixture
def one_listener(scripted: KokoroEngine) -> Iterator[RunningServer]:
    """On the scripted engine: what is admitted, queued and refused, and when, is paced audio and slots, not
    the model's sound (its audio plays in real time all the same)."""
    server = _one_listener_server(scripted, wait_s=20)
    yield server
    server.stop()


async def first_event(ws: Any, timeout: float = 60.0) -> dict[str, Any]:
    while True:
        frame = await asyncio.wait_for(ws.recv(), timeout)
        if isinstance(frame, str):
            return json.loads(frame)  # type: ignore[no-any-return]


async def until_complete(ws: Any, msg_id: str) -> list[str]:
    kinds = []
    while True:
        frame = await asyncio.wait_for(ws.recv(), 60)
        if isinstance(frame, str):
            event = json.loads(frame)
            kinds.append(event["type"])
            if event.get("id") == msg_id and event["type"] in ("synthesis_complete", "error"):
                return kinds


@pytest.fixture
def one_patient_listener(scripted: KokoroEngine) -> Iterator[RunningServer]:
    """One listener, and a wait long enough for a 14 s answer to end on a busy machine (20 s was not, in a
    clean-clone CI run beside mypy and Pipecat's suite: the waiting caller was refused)."""
    server = _one_listener_server(scripted, wait_s=60)
    yield server
    server.stop()


@pytest.mark.slow
async def test_one_too_many_waits_told_and_one_more_is_refused(one_patient_listener: RunningServer) -> None:
    one_listener = one_patient_listener
    ws_url = one_listener.url.replace("http", "ws") + "/invocations-bidirectional-stream"
    async with connect(ws_url) as a, connect(ws_url) as b, connect(ws_url) as c:
        await a.send(json.dumps({"text": LONG, "id": "a1"}))
        started = await first_event(a)
        assert started["type"] == "synthesis_started"
        # Told at once: the first thing each hears is its place in the queue, or a refusal whose retry hint
        # says when (not the end of a wait: "no listener slot freed within 60 s").
        await b.send(json.dumps({"text": "Hello, I will wait.", "id": "b1"}))
        queued = await first_event(b)
        assert queued == {"type": "queued", "id": "b1", "sequence": 0, "position": 1, "max_wait_s": 60}
        await c.send(json.dumps({"text": "And me?", "id": "c1"}))
        refused = await first_event(c)
        assert refused["type"] == "error" and refused["code"] == "server_busy" and refused["id"] == "c1"
        assert "retry in about" in refused["message"] and "freed within" not in refused["message"]
        assert metric(one_listener, "streamvoice_capacity_listeners") == 1
        assert metric(one_listener, "streamvoice_queued_listeners") == 1
        assert metric(one_listener, "streamvoice_headroom_listeners") == -1
        # The admitted listener is served to the end; then the waiting one gets the slot.
        assert (await until_complete(a, "a1"))[-1] == "synthesis_complete"
        kinds = await until_complete(b, "b1")
        assert kinds[0] == "synthesis_started" and kinds[-1] == "synthesis_complete"
        # HTTP callers cannot be told they wait: one whose slot frees within the wait (the holder's speech
        # ends: LiveKit's plugins call synthesize() right after a stream) is served once it has freed ...
        await wait_for(lambda: metric(one_listener, "streamvoice_admitted_listeners") == 0)  # b's released
        await a.send(json.dumps({"text": SENTENCE, "id": "a2"}))
        assert (await first_event(a))["type"] == "synthesis_started"  # a takes the slot again
        async with httpx.AsyncClient() as http:
            one_shot = asyncio.create_task(
                http.post(one_listener.url + "/invocations", json={"text": "Hi."}, timeout=60)
            )
            assert (await until_complete(a, "a2"))[-1] == "synthesis_complete"
            r = await one_shot
            assert r.status_code == 200 and r.content  # before: 503 while a's slot was about to free
            # ... and one behind a holder that cannot free in time is told busy at once (503).
            await wait_for(lambda: metric(one_listener, "streamvoice_admitted_listeners") == 0)
            await a.send(json.dumps({"text": SENTENCE * 40, "id": "a3"}))  # minutes of speech
            assert (await first_event(a))["type"] == "synthesis_started"
            r = await http.post(one_listener.url + "/invocations", json={"text": "Hi."}, timeout=60)
        assert (
            r.status_code == 503 and r.json()["error"]["code"] == "server_busy" and r.headers["retry-after"]
        )
        await a.send(json.dumps({"type": "cancel", "id": "a3"}))  # its end was checked with a1
        assert (await until_complete(a, "a3"))[-1] == "error"


async def test_the_server_as_shipped_counts_listeners_from_its_full_windows_measure(
    engine: KokoroEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Admission is on by default, counting listeners from the speed of full windows timed alone at warm-up
    (``engine.readiness.time_windows``): the warm-up's own speed, G2P loading and small windows included, read
    ~1.3x slower and sized 2 cores for one listener where they keep two fed. Here the measure is given (0.3
    s of work per second of audio: two listeners), so what is checked is what the server does with it; how
    fast this machine decodes is ``python -m streamvoice.bench.capacity``'s to say. That a caller beyond the
    slots is told at once is ``test_one_too_many_waits_told_and_one_more_is_refused``."""
    measured: list[str] = []

    def full_windows(
        timed: KokoroEngine, voice: str = "af_heart", frames: int = 40, passes: int = 2
    ) -> list[tuple[float, float]]:
        measured.append(voice)
        return [(1.6, 0.48), (1.6, 0.48)]

    monkeypatch.setattr(service_module, "time_windows", full_windows)
    # as shipped: warm-up on, admission measured (tests.helpers turns both off unless asked)
    server = await asyncio.to_thread(start_speech_server, engine, warm_up=True, admission_listeners=0)
    try:
        service = server.drainer.app.state.service
        assert measured and service.config.admission == "queue"
        assert service.load.decode_speed.rtf == pytest.approx(0.3)
        assert metric(server, "streamvoice_capacity_listeners") == measured_capacity(1, 0.3) == 2
    finally:
        await asyncio.to_thread(server.stop)


@pytest.mark.slow
async def test_a_caller_that_cannot_be_served_within_the_wait_is_told_at_once(
    one_listener: RunningServer,
) -> None:
    """Sessions of pipelined messages: the one admitted has about a minute of audio queued, so a newcomer
    (who may wait 20 s) is told ``server_busy`` at once with when to retry, never after the whole wait (it
    waited the whole ``ADMISSION_WAIT_S`` and was then refused). One that can be served in time still waits."""
    ws_url = one_listener.url.replace("http", "ws") + "/invocations-bidirectional-stream"
    async with connect(ws_url) as a, connect(ws_url) as b:
        asked_at = time.monotonic()
        for i in range(4):
            await a.send(json.dumps({"text": LONG, "id": f"a{i}"}))
        started = await first_event(a)
        assert started["type"] == "synthesis_started"
        await b.send(json.dumps({"text": "Can I speak now?", "id": "b1"}))
        refused = await first_event(b)
        assert refused["type"] == "error" and refused["code"] == "server_busy" and refused["id"] == "b1"
        assert "freed within" not in refused["message"]  # told at once, not at the end of the wait
        retry_s = float(refused["message"].split("retry in about ")[1].split(" s")[0])
        # Four answers (~53 s of speech), but a holder that never pauses hands its slot over past
        # ADMISSION_MAX_HOLD_S (30 s) at its next piece (PIECE_S, 10 s): the hint counts to there, less the
        # time since it was admitted (here at most since its messages were sent; the hint is rounded to
        # 0.1 s). A fixed 40 read 39.9 on a slow CI machine. Past the 20 s the newcomer could wait, which
        # is why it is told at once.
        said_s = time.monotonic() - asked_at
        assert max(30 + PIECE_S - said_s - 0.05, 20) <= retry_s <= 90, (retry_s, said_s)
        await a.send(json.dumps({"type": "cancel"}))  # barge-in: a's queue is gone
        await until_complete(a, "a3")
        await a.send(json.dumps({"text": "Only this.", "id": "a4"}))
        await first_event(a)  # a's next event: its cancel's last word, or a4 starting
        await b.send(json.dumps({"text": "And now?", "id": "b2"}))
        queued = await first_event(b)
        assert queued["type"] == "queued" and queued["id"] == "b2"  # a frees its slot within the wait
        assert (await until_complete(b, "b2"))[-1] == "synthesis_complete"


# --- 30. a slot held long goes at its next pause while others want one -----------------------------------


def test_a_long_held_slot_goes_at_its_pause_while_others_wait() -> None:
    async def scenario() -> None:
        now = [0.0]
        admission = Admission("refuse", lambda: 1, idle_release_s=2.0, max_hold_s=30.0, clock=lambda: now[0])
        chatty, other = FakeListener(), FakeListener()
        assert admission.enter(chatty) == "admitted"
        for _ in range(20):  # "Hi." every 1.9 s, nobody else waiting: it keeps its slot
            admission.idle(chatty)
            now[0] += 1.9
            assert admission.enter(chatty) == "admitted"
        assert admission.enter(other) == "refused"  # someone wants a slot now
        admission.idle(chatty)  # held 38 s > 30 s: the slot goes at this pause
        assert admission.enter(other) == "admitted"
        assert admission.enter(chatty) == "refused"

    asyncio.run(scenario())


@pytest.mark.parametrize(("hands_over", "hint_s"), [(True, 40.0), (False, 600.0)])
def test_a_retry_hint_counts_an_http_answer_to_its_end(hands_over: bool, hint_s: float) -> None:
    """A socket held 0 s of a 30 s hold frees at its turn's end and the next piece's (30 + 10 s); a streamed
    HTTP answer cannot hand over (``Seat.hands_over``): its 600 s of speech is what the hint says."""

    async def scenario() -> float:
        admission = Admission("refuse", lambda: 1, idle_release_s=0.0, max_hold_s=30.0, clock=lambda: 0.0)
        assert admission.enter(FakeListener(until=600.0, hands_over=hands_over)) == "admitted"
        assert admission.enter(FakeListener()) == "refused"
        return admission.retry_after_s()

    assert asyncio.run(scenario()) == hint_s


async def test_a_newcomer_behind_a_long_http_answer_is_told_when_it_ends(one_listener: RunningServer) -> None:
    """A streamed HTTP answer of ~100 s holds the only slot and cannot hand it over: a session newcomer is
    refused at once with a hint past that answer's end, not queued for a slot that will not free in time."""
    ws_url = one_listener.url.replace("http", "ws") + "/invocations-bidirectional-stream"
    body = {"input": (SENTENCE + " ") * 22, "response_format": "pcm", "voice": "af_heart"}
    async with (
        httpx.AsyncClient(base_url=one_listener.url, timeout=60) as http,
        http.stream("POST", "/v1/audio/speech", json=body) as response,
    ):
        assert response.status_code == 200
        chunks = response.aiter_bytes()  # kept: an iterator collected closes the response, and the slot goes
        await anext(chunks)  # the answer is speaking
        async with connect(ws_url) as b:
            await b.send(json.dumps({"text": "Can I speak now?", "id": "b1"}))
            refused = await first_event(b)
        await chunks.aclose()
    assert refused["type"] == "error" and refused["code"] == "server_busy", refused
    retry_s = float(refused["message"].split("retry in about ")[1].split(" s")[0])
    assert retry_s >= 60, refused  # 1,650 characters: about 100 s of speech, a few of them said


async def test_a_chatty_session_does_not_keep_the_only_slot(scripted: KokoroEngine) -> None:
    server = await asyncio.to_thread(
        start_speech_server, scripted, warm_up=False, admission="refuse", admission_listeners=1,
        admission_max_hold_s=3.0,
    )  # fmt: skip
    try:
        async with connect(server.ws_url) as chatty, connect(server.ws_url) as other:
            stop = asyncio.Event()

            async def chatter() -> None:
                i = 0
                while not stop.is_set():
                    await chatty.send(json.dumps({"text": "Hi.", "id": f"c{i}"}))
                    await next_answers(chatty, 1)
                    i += 1
                    await asyncio.sleep(1.0)  # under the idle release: it never lets go on its own

            task = asyncio.create_task(chatter())
            await wait_for(lambda: metric(server, "streamvoice_admitted_listeners") == 1)  # chatty holds it
            admitted_at = None  # which try got the slot (refused for good before)
            for i in range(20):
                await other.send(json.dumps({"text": "May I?", "id": f"o{i}"}))
                (answer,) = await next_answers(other, 1)
                if answer["type"] == "synthesis_complete":
                    admitted_at = i
                    break
                assert answer["code"] == "server_busy"
                await asyncio.sleep(1.0)
            stop.set()
            await task
        assert admitted_at is not None
    finally:
        await asyncio.to_thread(server.stop)


async def test_a_holder_that_never_pauses_hands_its_slot_over_at_a_piece_end(scripted: KokoroEngine) -> None:
    """One listener streams a long answer without a pause (a book over one socket); past
    ADMISSION_MAX_HOLD_S, with a caller waiting, its slot goes to that caller at its next piece's end, it is
    told it waits again, and it resumes once the newcomer's answer has ended."""
    server = await asyncio.to_thread(
        start_speech_server, scripted, warm_up=False, admission="queue", admission_listeners=1,
        admission_max_hold_s=2.0, admission_idle_s=0.5, admission_wait_s=30.0,
    )  # fmt: skip
    try:
        async with connect(server.ws_url, max_size=None) as holder, connect(server.ws_url) as newcomer:
            await holder.send(json.dumps({"type": "synthesize", "id": "book", "text": (SENTENCE + " ") * 4}))
            assert (await first_event(holder))["type"] == "synthesis_started"
            await newcomer.send(json.dumps({"text": "May I?", "id": "n"}))
            queued = await first_event(newcomer)
            assert queued["type"] == "queued"
            events: list[dict[str, Any]] = []
            newcomer_done = asyncio.create_task(next_answers(newcomer, 1, timeout=120))
            async with asyncio.timeout(180):
                while not events or events[-1]["type"] not in ("synthesis_complete", "error"):
                    frame = await holder.recv()
                    if isinstance(frame, str):
                        events.append(json.loads(frame))
                        if events[-1]["type"] == "queued":
                            handed_at = len(events)
            (answer,) = await newcomer_done
        kinds = [e["type"] for e in events]
        assert answer["type"] == "synthesis_complete"  # the newcomer was served within its wait
        handed = next(e for e in events if e["type"] == "queued")
        assert handed["handed_over"] is True and handed["id"] == "book", handed
        assert kinds[-1] == "synthesis_complete", kinds  # and the book went on to its end
        assert handed_at < len(events)
    finally:
        await asyncio.to_thread(server.stop)
