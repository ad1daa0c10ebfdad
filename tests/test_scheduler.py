"""The deadline scheduler and a listener's lane, without the model: ordering, requeueing, parking."""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamvoice.engine.planning import Piece
from streamvoice.protocol import DEFAULT_PAUSES, Pauses
from streamvoice.server.config import ServerConfig
from streamvoice.server.lane import (
    COST_SPREAD,
    LARGEST_WINDOW_FRAMES,
    MAX_UNSENT_S,
    PAST_CAPACITY_WINDOW_FRAMES,
    SMALLEST_WINDOW_FRAMES,
    Lane,
    window_frames,
)
from streamvoice.server.metrics import Metrics
from streamvoice.server.piece_audio import PieceAudio
from streamvoice.server.scheduler import Requeue, SynthesisScheduler
from streamvoice.server.window_cost import WindowCost


async def _order_of(policy: str) -> list[str]:
    scheduler = SynthesisScheduler(workers=1, policy=policy)  # type: ignore[arg-type]
    gate = threading.Event()
    order: list[str] = []
    blocker = scheduler.submit(lambda: gate.wait(5), deadline=0.0)
    scheduler.start()
    await asyncio.sleep(0.05)  # the worker is inside the blocker; the rest queue behind it
    now = time.monotonic()
    jobs = [
        scheduler.submit(lambda n=name: order.append(n), deadline=now + offset)  # type: ignore[misc]
        for name, offset in (("later", 3.0), ("soon", 1.0), ("urgent", 0.0))
    ]
    gate.set()
    await asyncio.gather(blocker, *jobs)
    scheduler.stop()
    return order


async def test_deadline_runs_the_most_urgent_first_and_fifo_runs_in_arrival_order() -> None:
    assert await _order_of("deadline") == ["urgent", "soon", "later"]
    assert await _order_of("fifo") == ["later", "soon", "urgent"]


async def test_a_requeued_job_yields_to_a_more_urgent_one_between_turns() -> None:
    scheduler = SynthesisScheduler(workers=1)
    ran: list[str] = []
    turns = iter(range(4))

    def long_job() -> int | Requeue:
        ran.append("long")
        time.sleep(0.1)  # one window's worth of decoding
        if next(turns) < 3:
            return Requeue(time.monotonic() + 10)  # its next window is not due for a while
        return 1

    scheduler.start()
    long = scheduler.submit(long_job, deadline=0.0)
    await asyncio.sleep(0.15)
    short = scheduler.submit(lambda: ran.append("new") or 2, deadline=time.monotonic())
    assert await asyncio.wait_for(short, 5) == 2 and await asyncio.wait_for(long, 5) == 1
    scheduler.stop()
    assert ran.index("new") < len(ran) - 1  # the newcomer went between the long job's turns


async def test_a_cancelled_job_is_skipped_and_stop_cancels_the_queue() -> None:
    scheduler = SynthesisScheduler(workers=1)
    ran: list[str] = []
    skipped = scheduler.submit(lambda: ran.append("skipped"))
    skipped.cancel()
    scheduler.start()
    assert await asyncio.wait_for(scheduler.submit(lambda: "ok"), 5) == "ok"
    assert ran == []
    scheduler.stop()
    late = scheduler.submit(lambda: "never")
    assert isinstance(late.exception(), RuntimeError)


# --- the lane, over a stand-in for the engine --------------------------------------------------------------


@dataclass
class _Engine:
    """Yields a fixed number of one-second windows per piece, instantly: the lane's logic, not the model's."""

    windows_per_piece: int = 20
    sample_rate: int = 24_000
    decoded: int = 0
    window_samples: int = 24_000
    slow_window_s: float = 0.3  # a piece whose text is "slow" takes this long per window

    def interruptible(self, stop: Any) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def stream_piece(self, piece: Any, voice: Any, speed: float, windowed: bool, plan: Any, cap: Any,
                     on_words: Any = None) -> Generator[NDArray[np.float32]]:  # fmt: skip
        for _ in range(self.windows_per_piece):
            if piece.text == "slow":
                time.sleep(self.slow_window_s)
            self.decoded += 1
            yield np.zeros(self.window_samples, dtype=np.float32)


@dataclass
class _Service:
    engine: _Engine = field(default_factory=_Engine)
    config: ServerConfig = field(default_factory=ServerConfig)
    metrics: Metrics = field(default_factory=Metrics)
    scheduler: SynthesisScheduler = field(default_factory=SynthesisScheduler)
    window_cost: WindowCost = field(default_factory=lambda: WindowCost(rtf=0.3))
    overloaded: bool = False
    active_lanes: int = 0
    trace: list[Any] | None = None

    def observe_decode(self, seconds: float, audio_s: float, alone: bool = False) -> None:
        pass

    def lane_activity(self, delta: int) -> None:
        self.active_lanes += delta


@dataclass(frozen=True)
class _Request:
    voice: Any = None
    speed: float = 1.0
    pauses: Pauses = DEFAULT_PAUSES


def _lane_decoding_one_piece() -> tuple[_Service, Lane, PieceAudio]:
    """A started scheduler and a lane with one 20-window piece queued on it."""
    service = _Service()
    service.scheduler.start()
    lane = Lane(service)  # type: ignore[arg-type]
    sink = PieceAudio(asyncio.get_running_loop(), lane)
    lane.add(Piece("x", "x", (1,)), _Request(), sink)  # type: ignore[arg-type]
    return service, lane, sink


async def test_a_lane_stops_decoding_for_a_listener_who_takes_nothing_and_resumes_when_they_do() -> None:
    service, lane, sink = _lane_decoding_one_piece()
    await asyncio.sleep(0.3)
    parked_at = service.engine.decoded
    assert lane.unsent_s <= MAX_UNSENT_S + 1 and parked_at < service.engine.windows_per_piece
    windows = sink.windows()
    for _ in range(parked_at):  # the listener catches up
        await anext(windows)
    await asyncio.sleep(0.3)
    assert service.engine.decoded > parked_at  # resumed
    rest = [w async for w in windows]
    assert parked_at + len(rest) == service.engine.windows_per_piece
    assert lane.unsent_s == 0
    service.scheduler.stop()


async def test_cancelling_a_piece_releases_what_it_held_and_restarts_playback() -> None:
    service, lane, sink = _lane_decoding_one_piece()
    await asyncio.sleep(0.3)
    assert lane.unsent_s > 0 and lane.play_end > time.monotonic()
    sink.cancel()
    lane.restart_playback()
    await asyncio.sleep(0.1)
    assert lane.unsent_s == 0 and lane.play_end <= time.monotonic()
    assert [w async for w in sink.windows()] == []  # a cancelled piece ends its stream
    nxt = PieceAudio(asyncio.get_running_loop(), lane)
    lane.add(Piece("y", "y", (1,)), _Request(), nxt)  # type: ignore[arg-type]
    first = await asyncio.wait_for(anext(nxt.windows()), 5)  # the lane serves the next piece at once
    assert first.size == 24_000
    service.scheduler.stop()


async def test_the_server_counts_the_lanes_with_work_to_decode() -> None:
    service = _Service(engine=_Engine(windows_per_piece=3, window_samples=1_200))
    service.scheduler.start()
    loop = asyncio.get_running_loop()
    fast, slow = Lane(service), Lane(service)  # type: ignore[arg-type]
    fast_audio, slow_audio = PieceAudio(loop, fast), PieceAudio(loop, slow)
    slow.add(Piece("slow", "slow", (1,)), _Request(), slow_audio)  # type: ignore[arg-type]
    fast.add(Piece("fast", "fast", (1,)), _Request(), fast_audio)  # type: ignore[arg-type]
    assert service.active_lanes == 2
    assert len([w async for w in fast_audio.windows()]) == 3
    assert len([w async for w in slow_audio.windows()]) == 3
    await asyncio.sleep(0.05)
    assert service.active_lanes == 0
    service.scheduler.stop()


async def test_a_parked_lane_does_not_count_as_wanting_the_model() -> None:
    service, lane, sink = _lane_decoding_one_piece()
    await asyncio.sleep(0.3)  # parked: more than MAX_UNSENT_S decoded and not taken
    assert lane.unsent_s > 0 and service.active_lanes == 0
    windows = [w async for w in sink.windows()]  # the listener takes it all; the lane resumes and ends
    await asyncio.sleep(0.05)  # the turn after the piece's end finds nothing more to do
    assert len(windows) == service.engine.windows_per_piece and service.active_lanes == 0
    service.scheduler.stop()


async def test_windows_are_sized_for_throughput_past_capacity_and_for_the_waiting_listener_otherwise() -> (
    None
):
    service = _Service()
    lane = Lane(service)  # type: ignore[arg-type]
    blocker = threading.Event()
    service.scheduler = SynthesisScheduler(workers=1)
    service.scheduler.start()
    service.scheduler.submit(blocker.wait)  # holds the worker
    waiting = service.scheduler.submit(lambda: None, deadline=time.monotonic() + 0.5)  # due soon
    assert lane._window_cap() < LARGEST_WINDOW_FRAMES  # ends before the waiting listener runs out
    service.overloaded = True
    assert lane._window_cap() == PAST_CAPACITY_WINDOW_FRAMES
    blocker.set()
    await waiting
    service.scheduler.stop()


def test_a_window_never_asks_for_more_decoding_than_the_audio_buffered() -> None:
    """A piece's second window once took 0.18-0.22 s to decode after a first window of 0.185 s of audio:
    a gap in the middle of a word. Each window now fits in what its listener has buffered (and, when
    another listener waits, in what that one has left less its own smallest window), with the measured
    spread of window costs to spare."""
    cost = WindowCost(rtf=0.33)  # 2 cores: 40 frames ~0.33 s
    for own_s in (0.3, 0.5, 0.8):
        frames = window_frames(cost, own_s=own_s, waiting_s=None, floor=cost.floor_frames(1))
        assert SMALLEST_WINDOW_FRAMES <= frames <= LARGEST_WINDOW_FRAMES
        assert COST_SPREAD * cost.seconds(frames) <= own_s
    assert window_frames(cost, own_s=5.0, waiting_s=None, floor=0.0) == LARGEST_WINDOW_FRAMES
    # Another listener runs out in 0.6 s: this window and that one's smallest both end before then.
    frames = window_frames(cost, own_s=5.0, waiting_s=0.6, floor=cost.floor_frames(2))
    assert COST_SPREAD * (cost.seconds(frames) + cost.seconds(SMALLEST_WINDOW_FRAMES)) <= 0.6
    assert frames > SMALLEST_WINDOW_FRAMES


def test_two_listeners_short_of_audio_never_get_windows_smaller_than_they_can_sustain() -> None:
    """Both short of audio: windows stay large enough that the machine makes audio faster than both play
    it, whatever the budgets say. Smaller windows cost more per second of audio: two listeners whose
    buffers shrank together had their windows shrunk further and stayed behind (6-12 s of stalls with
    12-frame windows)."""
    cost = WindowCost(rtf=0.4)  # 40 frames: 0.1 s fixed + 0.3 s; 12 frames: 0.19 s
    floor = cost.floor_frames(2)
    assert floor is not None and floor > SMALLEST_WINDOW_FRAMES
    for own_s, waiting_s in ((0.0, 0.0), (-0.5, 0.1), (2.0, 0.0), (0.2, 0.3)):
        frames = window_frames(cost, own_s=own_s, waiting_s=waiting_s, floor=floor)
        assert frames >= floor
        assert 2 * cost.seconds(frames) <= frames * 0.025  # both keep up
    assert cost.floor_frames(3) is None  # no size sustains three: the largest
    assert window_frames(cost, own_s=0.0, waiting_s=0.0, floor=None) == LARGEST_WINDOW_FRAMES


def test_a_listener_short_of_audio_is_kept_fed_from_the_others_spare() -> None:
    """A newcomer, or a piece's start, while the other listener has audio to spare: the floor there made a
    12-frame second window 16 (a 43 ms gap) and a 31-frame window a 240 ms stall (traced, two listeners,
    a busy loop on half a core). Then the listener's own budget decides."""
    cost = WindowCost(rtf=0.33)
    floor = cost.floor_frames(2)
    assert floor is not None and COST_SPREAD * cost.seconds(math.ceil(floor)) > 0.185
    for waiting_s in (None, 1.0, 3.0):
        frames = window_frames(cost, own_s=0.185, waiting_s=waiting_s, floor=floor)
        assert frames == SMALLEST_WINDOW_FRAMES < floor
    frames = window_frames(cost, own_s=0.3, waiting_s=1.0, floor=floor)
    assert COST_SPREAD * cost.seconds(frames) <= 0.3


async def test_a_lane_sizes_its_window_from_its_own_buffer_and_the_listener_waiting() -> None:
    service = _Service()
    service.window_cost = WindowCost(rtf=0.33)
    service.active_lanes = 1
    lane = Lane(service)  # type: ignore[arg-type]
    lane.play_end = time.monotonic() + 0.3
    assert lane._window_cap() < LARGEST_WINDOW_FRAMES  # 0.3 s buffered: not a 40-frame window
    lane.play_end = time.monotonic() + 5.0
    assert lane._window_cap() == LARGEST_WINDOW_FRAMES
    blocker = threading.Event()
    service.scheduler = SynthesisScheduler(workers=1)
    service.scheduler.start()
    service.scheduler.submit(blocker.wait)  # holds the worker
    waiting = service.scheduler.submit(lambda: None, deadline=time.monotonic() + 0.4)
    assert lane._window_cap() < LARGEST_WINDOW_FRAMES  # it lets the listener due soon in
    blocker.set()
    await waiting
    service.scheduler.stop()
