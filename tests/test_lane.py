"""A listener's lane over a stand-in for the engine: parking, resuming, cancelling, counting, sizing."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.asyncio.client import connect

from streamvoice.engine import KokoroEngine
from streamvoice.engine.planning import Piece
from streamvoice.server.core.lane import MAX_UNSENT_S, Lane
from streamvoice.server.core.piece_audio import PieceAudio
from streamvoice.server.core.scheduler import SynthesisScheduler
from streamvoice.server.core.window_sizing import (
    LARGEST_WINDOW_FRAMES,
    PAST_CAPACITY_WINDOW_FRAMES,
    WindowCost,
)
from tests.fakes import FakeEngine, FakeHost, FakeRequest
from tests.helpers import (
    RunningServer,
    start_speech_server,
    wait_for,
)
from tests.helpers import answers as next_answers


def _lane_decoding_one_piece() -> tuple[FakeHost, Lane, PieceAudio]:
    """A started scheduler and a lane with one 20-window piece queued on it."""
    service = FakeHost()
    service.scheduler.start()
    lane = Lane(service)
    sink = PieceAudio(asyncio.get_running_loop(), lane)
    lane.add(Piece("x", "x", (1,)), FakeRequest(), sink)
    return service, lane, sink


async def test_a_lane_stops_decoding_for_a_listener_who_takes_nothing_and_resumes_when_they_do() -> None:
    service, lane, sink = _lane_decoding_one_piece()
    await wait_for(lambda: lane._parked)
    parked_at = service.engine.decoded
    assert lane.unsent_s <= MAX_UNSENT_S + 1 and parked_at < service.engine.windows_per_piece
    windows = sink.windows()
    for _ in range(parked_at):  # the listener catches up
        await anext(windows)
    await wait_for(lambda: service.engine.decoded > parked_at)  # resumed
    rest = [w async for w in windows]
    assert parked_at + len(rest) == service.engine.windows_per_piece
    assert lane.unsent_s == 0
    service.scheduler.stop()


async def test_cancelling_a_piece_releases_what_it_held_and_restarts_playback() -> None:
    service, lane, sink = _lane_decoding_one_piece()
    await wait_for(lambda: lane._parked)
    assert lane.unsent_s > 0 and lane.play_end > time.monotonic()
    sink.cancel()
    lane.restart_playback()
    await wait_for(lambda: lane.unsent_s == 0)
    assert lane.play_end <= time.monotonic()
    assert [w async for w in sink.windows()] == []  # a cancelled piece ends its stream
    nxt = PieceAudio(asyncio.get_running_loop(), lane)
    lane.add(Piece("y", "y", (1,)), FakeRequest(), nxt)
    first = await asyncio.wait_for(anext(nxt.windows()), 5)  # the lane serves the next piece at once
    assert first.size == 24_000
    service.scheduler.stop()


async def test_a_window_finished_after_its_piece_was_cancelled_is_not_played() -> None:
    """A model call cannot always be interrupted: the window it was making when the barge-in came is dropped,
    and the listener's playback clock stays restarted (the next answer is due now, not a window later)."""
    service = FakeHost(engine=FakeEngine(windows_per_piece=20))
    service.scheduler.start()
    lane = Lane(service)
    sink = PieceAudio(asyncio.get_running_loop(), lane)
    lane.add(Piece("slow", "slow", (1,)), FakeRequest(), sink)  # each window takes 0.3 s, uninterruptible
    await wait_for(lambda: service.engine.decoded >= 1)  # a later window is being made
    made = service.engine.decoded  # read when the barge-in comes, however late a busy machine polled
    sink.cancel()
    lane.restart_playback()
    await wait_for(lambda: lane._current is None)  # the window in flight finished, then was dropped
    assert service.engine.decoded in (made, made + 1)  # and no window was begun after the cancel
    assert lane.play_end <= time.monotonic()
    service.scheduler.stop()


async def test_the_server_counts_the_lanes_with_work_to_decode() -> None:
    service = FakeHost(engine=FakeEngine(windows_per_piece=3, window_samples=1_200))
    service.scheduler.start()
    loop = asyncio.get_running_loop()
    fast, slow = Lane(service), Lane(service)
    fast_audio, slow_audio = PieceAudio(loop, fast), PieceAudio(loop, slow)
    slow.add(Piece("slow", "slow", (1,)), FakeRequest(), slow_audio)
    fast.add(Piece("fast", "fast", (1,)), FakeRequest(), fast_audio)
    assert service.load.active_lanes == 2
    assert len([w async for w in fast_audio.windows()]) == 3
    assert len([w async for w in slow_audio.windows()]) == 3
    await wait_for(lambda: service.load.active_lanes == 0)
    service.scheduler.stop()


async def test_a_parked_lane_does_not_count_as_wanting_the_model() -> None:
    service, lane, sink = _lane_decoding_one_piece()
    await wait_for(lambda: lane._parked)  # more than MAX_UNSENT_S decoded and not taken
    assert lane.unsent_s > 0 and service.load.active_lanes == 0
    windows = [w async for w in sink.windows()]  # the listener takes it all; the lane resumes and ends
    # the turn after the piece's end finds nothing more to do
    await wait_for(lambda: service.load.active_lanes == 0)
    assert len(windows) == service.engine.windows_per_piece
    service.scheduler.stop()


async def test_windows_are_sized_for_throughput_past_capacity_and_for_the_waiting_listener_otherwise() -> (
    None
):
    service = FakeHost()
    lane = Lane(service)
    blocker = threading.Event()
    service.scheduler = SynthesisScheduler(workers=1)
    service.scheduler.start()
    service.scheduler.submit(blocker.wait)  # holds the worker
    waiting = service.scheduler.submit(lambda: None, deadline=time.monotonic() + 0.5)  # due soon
    assert lane._window_cap() < LARGEST_WINDOW_FRAMES  # ends before the waiting listener runs out
    service.load.lane_activity(6)  # past capacity (4 listeners) by two and more
    assert lane._window_cap() == PAST_CAPACITY_WINDOW_FRAMES
    service.load.lane_activity(-6)
    blocker.set()
    await waiting
    service.scheduler.stop()


async def test_a_lane_sizes_its_window_from_its_own_buffer_and_the_listener_waiting() -> None:
    service = FakeHost()
    service.load.window_cost = WindowCost(rtf=0.33)
    service.load.lane_activity(1)
    lane = Lane(service)
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


# --- 6 and 7. decode-ahead and real-time readers -----------------------------------------------------------


@pytest.fixture
def lanes() -> Iterator[list[Any]]:
    """Every listener lane the server creates while the test runs, in creation order."""
    from streamvoice.server.core.lane import Lane

    created: list[Lane] = []
    original = Lane.__init__

    def record(self: Lane, service: Any) -> None:
        original(self, service)
        created.append(self)

    Lane.__init__ = record  # type: ignore[method-assign]
    try:
        yield created
    finally:
        Lane.__init__ = original  # type: ignore[method-assign]


async def test_unread_audio_is_bounded_per_listener(
    scripted: KokoroEngine, lanes: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the scripted engine: the bound is the lane's, on the audio's length (the model's sound plays no
    part), and a graph that decodes at once reaches it soonest."""
    from streamvoice.server.core import lane

    monkeypatch.setattr(lane, "MAX_UNSENT_S", 2.0)  # the bound, smaller: the same rule, less audio to make
    bound = lane.MAX_UNSENT_S

    server = await asyncio.to_thread(
        start_speech_server, scripted, sndbuf=4096, warm_up=False, send_timeout_s=60
    )
    try:
        text = "The quick brown fox jumps over the lazy dog near the river bank today. " * 30
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        async with connect(server.ws_url, sock=sock, max_queue=1) as ws:
            await ws.send(json.dumps({"text": text, "id": "big"}))  # ~60 s of audio; we read none of it
            held: list[float] = []

            def parked() -> bool:
                if not lanes:
                    return False
                held.append(lanes[-1].unsent_s)
                return bool(lanes[-1]._parked)

            await wait_for(parked)  # decoding stopped until the sender catches up
            for _ in range(10):  # while the transport's buffers take what they can, it decodes a window at
                await asyncio.sleep(0.1)  # most past the bound each time they do, then stops again
                parked()
            await wait_for(parked)
            assert max(held) <= bound + 1.0  # one window past the bound at most
            await ws.send(json.dumps({"type": "cancel"}))
    finally:
        await asyncio.to_thread(server.stop)


# --- 11. barge-in ---------------------------------------------------------------------------------------------


async def test_after_a_barge_in_the_next_answer_is_due_now(
    scripted_server: RunningServer, lanes: list[Any]
) -> None:
    """On the scripted engine, which decodes ahead of playback whatever else the machine runs (the model on a
    loaded 2-core machine can fall behind real time, and then nothing is ever a second ahead)."""
    async with connect(scripted_server.ws_url) as ws:
        await ws.send(json.dumps({"text": "A long answer the caller interrupts. " * 6, "id": "a"}))
        while isinstance(await asyncio.wait_for(ws.recv(), 30), str):
            pass
        # a second of audio decoded ahead of playback
        await wait_for(lambda: lanes[-1].play_end > time.monotonic() + 1)
        await ws.send(json.dumps({"type": "cancel"}))
        while not (isinstance(frame := await ws.recv(), str) and json.loads(frame)["type"] == "error"):
            pass  # the rest of the audio already on the wire, then the cancelled answer
        assert lanes[-1].play_end <= time.monotonic()  # nothing is playing any more
        await ws.send(json.dumps({"text": "Sorry, go ahead.", "id": "b"}))
        answers = await next_answers(ws, 1)
        assert answers[-1]["type"] == "synthesis_complete"
