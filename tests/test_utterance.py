"""The utterance, the server's core, over a stand-in planner and engine: text whole or streamed in, events
out in order, cancelling (all or by id), errors, word times from the utterance's first sample."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest
from websockets.asyncio.client import connect

from streamvoice.engine import KokoroEngine
from streamvoice.engine.voices import VoiceSpec
from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.events import Completed, Event, Failed, PieceEnded, PieceStarted
from streamvoice.server.core.lane import Lane
from streamvoice.server.core.piece_audio import Words
from streamvoice.server.core.requests import ResolvedRequest
from streamvoice.server.core.utterance import Utterance
from streamvoice.server.core.utterance_bounds import StreamBounds
from streamvoice.server.core.utterances import Utterances
from tests.fakes import FakeEngine, FakeHost, FakePieceSource
from tests.helpers import answers as next_answers
from tests.helpers import (
    on_each_chunk,
    start_speech_server,
)

WINDOW = 2_400  # samples per stand-in window: 0.1 s


def _request(text: str = "") -> ResolvedRequest:
    return ResolvedRequest(
        text=text, voice=VoiceSpec((("af_heart", 1.0),)), speed=1.0, format="pcm", lang="en-us"
    )


def _host(windows: int = 2) -> FakeHost:
    host = FakeHost(engine=FakeEngine(windows_per_piece=windows, window_samples=WINDOW, words=True))
    host.scheduler.start()
    return host


async def _events(utterance: Utterance) -> list[Event]:
    return [e async for e in utterance.events()]


def _kinds(events: list[Event]) -> list[str]:
    return ["audio" if isinstance(e, np.ndarray) else type(e).__name__ for e in events]


async def test_whole_text_comes_out_piece_by_piece_in_order_with_word_times_from_the_first_sample() -> None:
    host = _host(windows=2)
    utterance = Utterance(FakePieceSource(), _request("Hello there. How are you."), Lane(host))
    utterance.say()
    events = await asyncio.wait_for(_events(utterance), 10)
    one_piece = ["PieceStarted", "Words", "audio", "audio", "PieceEnded"]
    assert _kinds(events) == one_piece + one_piece + ["Completed"]
    words = [e for e in events if isinstance(e, Words)]
    # The second piece's words start after the first piece's audio.
    second = next(i for i, e in enumerate(events) if e is words[1])
    first_piece_samples = sum(e.size for e in events[:second] if isinstance(e, np.ndarray))
    assert words[0].times[0].start_ms == 0.0
    assert words[1].times[0].start_ms == pytest.approx(first_piece_samples * 1000 / 24_000, abs=0.1)
    done = events[-1]
    assert isinstance(done, Completed) and done.pieces == 2
    assert done.samples == sum(e.size for e in events if isinstance(e, np.ndarray))
    host.scheduler.stop()


async def test_streamed_text_starts_speaking_before_it_ends_and_flush_speaks_what_is_buffered() -> None:
    host = _host()
    planner = FakePieceSource()
    utterance = Utterance(planner, _request(), Lane(host))
    events = utterance.events()
    for token in ["Sure", ",", " I", " can", " help", " with", " that", ".", " The", " next"]:
        utterance.append(token)
    first = await asyncio.wait_for(anext(events), 5)  # the fast first piece, with the text still open
    assert isinstance(first, PieceStarted) and not utterance.ended
    utterance.flush()  # " The next": spoken now, as it stands
    utterance.append(" one follows.")
    utterance.end()
    rest = [e async for e in events]
    assert isinstance(rest[-1], Completed)
    assert " ".join(planner.planned).replace(" ,", ",") == "Sure, I can help with that. The next one follows."
    host.scheduler.stop()


async def test_a_mark_follows_the_audio_of_everything_before_it_and_precedes_what_comes_after() -> None:
    """``mark``: a vendor's "flush done" (Cartesia's ``flush_done``) comes once what was sent before it has
    been spoken, never before its audio nor after the next text's."""
    host = _host()
    utterance = Utterance(FakePieceSource(), _request(), Lane(host))
    utterance.append("One two three.")
    utterance.mark(1)
    utterance.append(" Four five.")
    utterance.mark(2)
    utterance.end()
    kinds = _kinds(await asyncio.wait_for(_events(utterance), 10))
    one_piece = ["PieceStarted", "Words", "audio", "audio", "PieceEnded"]
    assert kinds == [*one_piece, "Marked", *one_piece, "Marked", "Completed"], kinds
    host.scheduler.stop()


async def test_a_finished_sentence_is_spoken_after_the_quiet_cut_without_an_end() -> None:
    host = _host()
    planner = FakePieceSource()
    utterance = Utterance(planner, _request(), Lane(host), quiet_cut_s=0.05)
    utterance.append("Good evening.")
    await asyncio.sleep(0.3)
    assert planner.planned == ["Good evening."] and not utterance.ended
    utterance.end()
    assert isinstance((await asyncio.wait_for(_events(utterance), 5))[-1], Completed)
    host.scheduler.stop()


async def test_streamed_text_is_bounded_in_characters_and_in_time() -> None:
    host = _host()
    planner = FakePieceSource()
    capped = Utterance(planner, _request(), Lane(host), bounds=StreamBounds(max_chars=20, idle_end_s=60))
    capped.append("Twelve chars")
    with pytest.raises(ProtocolError) as refused:
        capped.append(" and then too many.")
    assert refused.value.code == ErrorCode.TEXT_TOO_LONG and capped.ended  # what came is spoken, then done
    assert isinstance((await asyncio.wait_for(_events(capped), 5))[-1], Completed)
    told: list[bool] = []
    idle = Utterance(planner, _request(), Lane(host), bounds=StreamBounds(max_chars=100, idle_end_s=0.1))
    idle.on_idle = lambda: told.append(True)
    idle.append("Nobody ends me")
    await asyncio.sleep(0.3)
    assert idle.ended and told == [True]  # ended as it stands, and the surface was told
    assert isinstance((await asyncio.wait_for(_events(idle), 5))[-1], Completed)
    host.scheduler.stop()


async def test_punctuation_between_streamed_tokens_is_skipped_and_nothing_speakable_is_one_error() -> None:
    host = _host()
    utterance = Utterance(FakePieceSource(), _request(), Lane(host))
    utterance.append("... !")
    utterance.end()
    events = await asyncio.wait_for(_events(utterance), 5)
    assert len(events) == 1 and isinstance(events[0], Failed)
    assert events[0].error.code == ErrorCode.EMPTY_TEXT
    host.scheduler.stop()


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("Fine. Broken. Never said.", ErrorCode.INVALID_SSML),
        ("Fine. boom. Never said.", ErrorCode.SYNTHESIS_FAILED),
    ],
)
async def test_a_failure_in_planning_or_in_the_model_ends_the_utterance_with_one_error(
    text: str, code: ErrorCode
) -> None:
    host = _host()
    utterance = Utterance(FakePieceSource(fail_on="Broken."), _request(text), Lane(host))
    utterance.say()
    events = await asyncio.wait_for(_events(utterance), 5)
    failures = [e for e in events if isinstance(e, Failed)]
    assert len(failures) == 1 and events[-1] is failures[0] and failures[0].error.code == code
    assert not any(isinstance(e, Completed) for e in events)
    assert sum(isinstance(e, PieceEnded) for e in events) <= 1  # "Fine." at most, nothing after
    host.scheduler.stop()


async def test_cancelling_mid_answer_stops_the_work_and_answers_cancelled() -> None:
    host = _host(windows=200)
    utterance = Utterance(FakePieceSource(), _request("One. Two. Three."), Lane(host))
    utterance.say()
    events = utterance.events()
    while not isinstance(await anext(events), np.ndarray):
        pass
    utterance.cancel()
    rest = [e async for e in events]
    assert isinstance(rest[-1], Failed) and rest[-1].error.code == ErrorCode.CANCELLED
    await asyncio.sleep(0.1)
    decoded = host.engine.decoded
    await asyncio.sleep(0.2)
    assert host.engine.decoded == decoded < 600  # nothing more is decoded for it
    host.scheduler.stop()


async def test_a_consumer_that_leaves_abandons_the_work() -> None:
    host = _host(windows=200)
    utterance = Utterance(FakePieceSource(), _request("One. Two."), Lane(host))
    utterance.say()
    events = utterance.events()
    await anext(events)
    await events.aclose()
    await asyncio.sleep(0.1)
    decoded = host.engine.decoded
    await asyncio.sleep(0.2)
    assert host.engine.decoded == decoded
    host.scheduler.stop()


async def test_what_the_gate_raises_is_the_utterances_one_error() -> None:
    host = _host()

    async def refuse() -> None:
        raise ProtocolError(ErrorCode.SERVER_BUSY, "no slot")

    utterance = Utterance(FakePieceSource(), _request("Hello."), Lane(host), gate=refuse)
    utterance.say()
    events = await asyncio.wait_for(_events(utterance), 5)
    assert (
        len(events) == 1 and isinstance(events[0], Failed) and events[0].error.code == ErrorCode.SERVER_BUSY
    )
    host.scheduler.stop()


async def test_cancel_by_id_leaves_the_others_and_only_the_speaking_one_restarts_playback() -> None:
    host = _host(windows=50)
    lane = Lane(host)
    queue = Utterances(FakePieceSource(), lane)
    restarts: list[bool] = []
    queue.on_restart = lambda: restarts.append(True)
    first, second, third = (queue.start(_request(f"Message {n}."), uid=str(n)) for n in (1, 2, 3))
    for u in (first, second, third):
        u.say()
    streams: dict[str, AsyncIterator[Event]] = {u.id or "": u.events() for u in (first, second, third)}
    await anext(streams["1"])
    await asyncio.sleep(0.05)
    playing_until = lane.play_end
    assert [u.id for u in queue.cancel("2")] == ["2"]
    assert lane.play_end == playing_until and not restarts  # the one queued behind was not playing
    assert [u.id for u in queue.cancel("2")] == []  # once only
    assert [u.id for u in queue.cancel()] == ["1", "3"]  # barge-in: the rest
    assert lane.play_end < playing_until and restarts == [True]  # the one being spoken was among them

    async def last(stream: AsyncIterator[Event]) -> Any:
        return [e async for e in stream][-1]

    for uid in ("1", "2", "3"):
        end = await asyncio.wait_for(last(streams[uid]), 5)
        assert isinstance(end, Failed) and end.error.code == ErrorCode.CANCELLED
    host.scheduler.stop()


async def test_first_audio_of_a_long_message_does_not_wait_for_its_planning(
    engine: KokoroEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The planning thread is held after the text's second chunk: its first audio can only come if it
    does not wait for the rest of its planning (before, 10k characters were planned first: seconds)."""
    planned: list[str] = []
    go_on = threading.Event()

    def held(chunk: str) -> None:
        planned.append(chunk)
        if len(planned) > 2:
            go_on.wait(120)

    on_each_chunk(monkeypatch, engine.planner, held)
    server = await asyncio.to_thread(start_speech_server, engine, warm_up=False)
    try:
        text = "and then we walked a little further down the road, " * 190  # ~10k chars, no sentence end
        async with connect(server.ws_url) as ws:
            await ws.send(json.dumps({"text": text[:9_990], "id": "long"}))
            while isinstance(frame := await asyncio.wait_for(ws.recv(), 60), str):
                pass  # synthesis_started
            assert len(frame) > 0 and len(planned) <= 3, len(planned)
            go_on.set()
            await ws.send(json.dumps({"type": "cancel"}))
            answers = await next_answers(ws, 1)
            assert answers[-1]["code"] == "cancelled"
        # a second client is served promptly once the first has gone (planning stopped with it)
        async with connect(server.ws_url) as ws:
            await ws.send(json.dumps({"text": "Next caller.", "id": "next"}))
            answers = await next_answers(ws, 1)
            assert answers[-1]["type"] == "synthesis_complete"
    finally:
        await asyncio.to_thread(server.stop)
