"""`server.core.watch`: a slowdown is noticed from the admitted listeners' buffers, the newest listener with
work is shed (never the first admitted, never a lone one), admission then holds only those left; on the real
server each wire tells the shed listener in its own shape and the others go on."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.tts import Synthesize

from streamvoice.asgi import free_port
from streamvoice.engine import KokoroEngine
from streamvoice.protocol import WS_PATH, ErrorCode
from streamvoice.server.core.admission import Admission
from streamvoice.server.core.load import Load, RecentCost
from streamvoice.server.core.metrics import Metrics
from streamvoice.server.core.watch import Watch
from tests.fakes import FakeListener
from tests.helpers import RunningServer, metric, start_speech_server, wait_for


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@dataclass
class FakeLane:
    """A lane as the watch reads it: work or none, how long before its listener goes silent, and the model
    time its work took lately."""

    margin: float = 2.0
    has_work: bool = True
    ready_at: float = 0.0
    play_end: float = 10.0  # established: it has had seconds decoded since its work began
    cost: RecentCost = field(default_factory=RecentCost)

    def margin_s(self, now: float, first_window_s: float) -> float:
        return self.margin


class Holder(FakeListener):
    def __init__(self, name: str) -> None:
        super().__init__(lane=FakeLane())
        self.name = name


def _watch(clock: Clock, capacity: int = 3) -> tuple[Watch, Admission, Metrics]:
    admission = Admission("queue", lambda: capacity, clock=clock)
    metrics = Metrics()
    return Watch(admission, metrics, clock=clock), admission, metrics


async def test_fed_listeners_are_left_alone_and_a_starving_one_sheds_the_newest() -> None:
    clock = Clock()
    watch, admission, metrics = _watch(clock)
    first, second, third = Holder("first"), Holder("second"), Holder("third")
    for who in (first, second, third):
        assert admission.enter(who) == "admitted"
        clock.now += 1
    assert watch.check() == []  # everyone has audio ahead
    first.lane.margin = 0.4  # the first admitted drains: the machine no longer feeds all three
    assert watch.check() == []  # one look is not enough
    clock.now += 0.2
    assert watch.check() == [third]  # the newest, never the one that is starving
    watch.shed(third)
    assert third.told is not None and third.told.code == ErrorCode.SERVER_BUSY
    assert "retry in about 15 s" in third.told.message.lower()
    assert not admission.holds(third) and metrics.shed == 1
    assert admission.capacity == 2  # newcomers are told at once: no more than the two left
    assert admission.enter(Holder("newcomer")) == "queued"
    clock.now += 0.2
    assert watch.check() == []  # cooling down: the margins recover first
    clock.now += 2.0
    first.lane.margin = 0.3
    watch.check()
    clock.now += 0.2
    assert watch.check() == [second]  # still starving: the next newest goes
    clock.now += 20
    assert admission.capacity == 3  # the ceiling lifts; the measure follows the machine again


async def test_the_listener_costing_far_past_its_share_is_shed_before_the_newest() -> None:
    """Issue #64: on a server feeding two, one session sent a 9,000-character hyphen-joined chain of digits
    (small pieces, a front call each); an ordinary caller a second later heard its first audio, then was
    told ``server_busy``: the newest was shed, not the one costing more than admission counted."""
    clock = Clock()
    watch, admission, _ = _watch(clock)
    chain, ordinary = Holder("chain"), Holder("ordinary")
    for who in (chain, ordinary):
        assert admission.enter(who) == "admitted"
        clock.now += 1
    for _ in range(20):  # the last two seconds: the chain took 0.9 s of model time a second, the other 0.1
        chain.lane.cost.add(0.09, clock.now)
        ordinary.lane.cost.add(0.01, clock.now)
        clock.now += 0.1
    ordinary.lane.margin = 0.3  # the newcomer starves behind the chain
    assert watch.check() == []
    clock.now += 0.2
    assert watch.check() == [chain]
    assert "costliest" in watch.reason
    # Costs near their share: the newest goes, as before
    clock.now += 10
    first, second = Holder("first"), Holder("second")
    watch2, admission2, _ = _watch(clock)
    for who in (first, second):
        assert admission2.enter(who) == "admitted"
        who.lane.cost.add(0.5, clock.now)
        clock.now += 1  # admitted one after the other: which is newest is plain
    first.lane.margin = 0.3
    assert watch2.check() == []
    clock.now += 0.2
    assert watch2.check() == [second]


async def test_a_harder_slowdown_is_judged_earlier_from_the_last_windows_cost() -> None:
    """The pace follows the last windows' cost against the fit (a slowdown shows within two windows); with
    two listeners working on a machine that now feeds fewer, a buffer is judged ``lead_s`` ahead of running
    dry: at a quarter of the speed, 1.0 s decoded ahead is already starving (at ``low_s`` alone it was not)."""
    clock = Clock()
    load = Load(workers=1)
    load.calibrate(0.4)  # 2.5 listeners fed at the measured speed
    admission = Admission("queue", lambda: 3, clock=clock)
    watch = Watch(admission, Metrics(), load, clock=clock)
    first, second = Holder("first"), Holder("second")
    for who in (first, second):
        admission.enter(who)
        clock.now += 1
    first.lane.margin = 1.0
    assert load.feedable() == pytest.approx(2.5) and watch.threshold(2) == watch.low_s
    assert watch.check() == []
    for _ in range(2):  # two full windows at a quarter of the speed
        load.observe_decode(4 * load.window_cost.seconds(40), 1.0)
    assert load.pace > 2.5
    assert watch.threshold(2) > 1.0  # each buffer drains ~0.6 s a second: judged 2 s ahead
    watch.check()
    clock.now += 0.2
    assert watch.check() == [second]
    for _ in range(8):  # the neighbour left: windows cost what the fit says again
        load.observe_decode(load.window_cost.seconds(40), 1.0)
    assert load.pace == pytest.approx(1.0, abs=0.02) and watch.threshold(2) == watch.low_s


async def test_when_the_pace_feeds_one_of_three_the_two_newest_are_told_at_once() -> None:
    """Not one shed at a time while the first drains: at a third of the measured speed the machine feeds
    about one of three, so the two newest go together, newest first, at the second look, while every buffer
    still holds seconds; at the measured pace nobody goes."""
    clock = Clock()
    load = Load(workers=1)
    load.calibrate(0.4)  # 2.5 listeners fed at the measured speed
    admission = Admission("queue", lambda: 3, clock=clock)
    watch = Watch(admission, Metrics(), load, clock=clock)
    listeners = [Holder(name) for name in ("first", "second", "third")]
    for who in listeners:
        admission.enter(who)
        who.lane.margin = 3.0
        clock.now += 1
    assert watch.check() == [] and watch.check() == []  # fed at the measured pace
    for _ in range(3):
        load.observe_decode(3 * load.window_cost.seconds(40), 1.0)
    assert 0.8 < load.feedable() < 1.5
    assert watch.check() == []  # one look is not enough
    clock.now += 0.2
    assert watch.check() == [listeners[2], listeners[1]]


async def test_a_lone_listener_and_listeners_without_work_are_never_shed() -> None:
    clock = Clock()
    watch, admission, _ = _watch(clock)
    alone, idle = Holder("alone"), Holder("idle")
    admission.enter(alone)
    admission.enter(idle)
    idle.lane.has_work = False  # between sentences of its LLM
    alone.lane.margin = -1.0  # starving, but there is nobody to shed for it
    for _ in range(5):
        assert watch.check() == []
        clock.now += 0.2


# -- on a real server (the scripted engine: the shed is chosen, each wire tells it) ----------------------------------------------------------------------------------

TEXT = "The courier left the depot at nine and will reach your street before noon. " * 4


@pytest.fixture(scope="module")
def server(scripted: KokoroEngine):  # type: ignore[no-untyped-def]
    """The scripted engine: the shed is chosen here, so what is tested is each wire's telling of it (the
    model's sound plays no part; its audio is paced all the same)."""
    running = start_speech_server(scripted, admission_listeners=3, admission_shed=False)
    yield running
    running.stop()


def _service(server: RunningServer) -> Any:
    return server.server.config.app.state.service  # type: ignore[attr-defined]


async def test_each_wire_tells_its_shed_listener_in_its_own_shape_and_the_first_goes_on(
    server: RunningServer,
) -> None:
    """The watch sheds whom it chooses through the one runtime: here it is made to choose (the machine's
    speed cannot be changed on cue in a test; ``bench.noisy_neighbour`` measures that)."""
    base = server.url.replace("http", "ws", 1)
    service = _service(server)
    async with (
        connect(base + WS_PATH, max_size=None) as first,
        connect(base + "/v1/speak?model=af_heart&encoding=linear16", max_size=None) as deepgram,
        connect(base + "/tts/websocket", max_size=None) as cartesia,
        asyncio.timeout(120),
    ):
        await first.send(json.dumps({"type": "synthesize", "id": "keep", "text": TEXT}))
        await deepgram.send(json.dumps({"type": "Speak", "text": TEXT}))
        await cartesia.send(
            json.dumps({"context_id": "c", "transcript": TEXT, "continue": False, "model_id": "sonic-2",
                        "voice": {"mode": "id", "id": "af_heart"},
                        "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000}})
        )  # fmt: skip
        await wait_for(lambda: service.admission.admitted == 3)
        order = service.admission.oldest_first()
        for who in reversed(order[1:]):  # the two newest, newest first
            service.watch.shed(who)
        told_deepgram = await _until(deepgram, lambda f: isinstance(f, str) and "Error" in f)
        told_cartesia = await _until(cartesia, lambda f: isinstance(f, str) and '"error"' in f)
        audio = 0
        while True:
            frame = await first.recv()
            if isinstance(frame, bytes):
                audio += len(frame)
            elif json.loads(frame)["type"] in ("synthesis_complete", "error"):
                done = json.loads(frame)
                break
    assert json.loads(told_deepgram)["code"] == "SERVER_BUSY"
    assert json.loads(told_cartesia)["status_code"] == 503 and json.loads(told_cartesia)["context_id"] == "c"
    assert done["type"] == "synthesis_complete" and audio > 24_000 * 2 * 10  # the first was never touched
    assert metric(server, "streamvoice_shed_listeners_total") == 2
    assert service.admission.admitted <= 1


@pytest.fixture
def four_wires(busy_scripted: KokoroEngine):  # type: ignore[no-untyped-def]
    """Windows that take time (Wyoming's answer is sent as made, not paced: it must still be in the making
    when the shed comes)."""
    port = free_port()
    running = start_speech_server(
        busy_scripted, admission_listeners=4, admission_shed=False, wyoming_uri=f"tcp://127.0.0.1:{port}"
    )
    yield running, port
    running.stop()


async def _sse_events(server: RunningServer, events: list[dict[str, Any]]) -> None:
    body = {"input": TEXT, "voice": "af_heart", "response_format": "pcm", "stream_format": "sse"}
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=120) as http,
        http.stream("POST", "/v1/audio/speech", json=body) as response,
    ):
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))  # the first: its answer is speaking, its status sent


async def test_elevenlabs_wyoming_and_streamed_http_are_told_too(
    four_wires: tuple[RunningServer, int],
) -> None:
    """The other wires that hold a listener: ElevenLabs' socket, Wyoming and a streamed HTTP answer (SSE)."""
    server, port = four_wires
    service = _service(server)
    url = server.url.replace("http", "ws", 1)
    sse: list[dict[str, Any]] = []
    async with (
        connect(url + WS_PATH, max_size=None) as first,
        connect(url + "/v1/text-to-speech/af_heart/stream-input?output_format=pcm_24000") as eleven,
        AsyncTcpClient("127.0.0.1", port) as wyoming,
        asyncio.timeout(120),
    ):
        await first.send(json.dumps({"type": "synthesize", "id": "keep", "text": TEXT}))
        await wait_for(lambda: service.admission.admitted == 1)  # the first admitted, before the others ask
        await eleven.send(json.dumps({"text": " "}))
        await eleven.send(json.dumps({"text": TEXT, "flush": True}))
        await wyoming.write_event(Synthesize(text=TEXT).event())
        http = asyncio.create_task(_sse_events(server, sse))
        await wait_for(lambda: service.admission.admitted == 4 and bool(sse))
        for who in reversed(service.admission.oldest_first()[1:]):
            service.watch.shed(who)
        told_eleven = json.loads(await _until(eleven, lambda f: '"error"' in f))
        while not Error.is_type((event := await wyoming.read_event()).type):  # type: ignore[union-attr]
            pass
        await http
        kinds = []
        while (kind := json.loads(frame)["type"] if isinstance(frame := await first.recv(), str) else "") not in (
            "synthesis_complete", "error",
        ):  # fmt: skip
            kinds.append(kind)
    assert told_eleven["error"] == "server_busy" and "Retry in about" in told_eleven["message"]
    assert Error.from_event(event).code == "server_busy"
    assert sse[-1]["type"] == "error" and sse[-1]["error"]["code"] == "server_busy", sse[-1]
    assert kind == "synthesis_complete"  # the first admitted was never touched
    assert metric(server, "streamvoice_shed_listeners_total") == 3


async def _until(ws: Any, match: Any) -> Any:
    while True:
        frame = await ws.recv()
        if match(frame):
            return frame
