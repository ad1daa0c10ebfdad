"""HTTP answers from an utterance: audio and word times in order, the one error raised, SSE's shape."""

from __future__ import annotations

import asyncio
import base64
import json

import numpy as np
import pytest

from streamvoice.engine.voices import VoiceSpec
from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.lane import Lane
from streamvoice.server.piece_audio import Words
from streamvoice.server.requests import ResolvedRequest
from streamvoice.server.streams import audio_body, audio_items, sse_body
from streamvoice.server.utterance import Utterance
from tests.fakes import FakeEngine, FakeHost, FakePlanner


def _utterance(text: str, planner: FakePlanner | None = None) -> tuple[FakeHost, Utterance]:
    host = FakeHost(engine=FakeEngine(windows_per_piece=2, window_samples=2_400, words=True))
    host.scheduler.start()
    request = ResolvedRequest(text, VoiceSpec((("af_heart", 1.0),)), 1.0, "pcm", "en-us")
    utterance = Utterance(planner or FakePlanner(), request, Lane(host))
    utterance.say()
    return host, utterance


async def test_items_are_word_times_then_audio_per_piece() -> None:
    host, utterance = _utterance("One two. Three.")
    items = [i async for i in audio_items(utterance)]
    kinds = ["words" if isinstance(i, Words) else "audio" for i in items]
    assert kinds[:3] == ["words", "audio", "audio"] and kinds.count("words") == 2
    host.scheduler.stop()


async def test_the_utterances_error_is_raised_to_the_http_caller() -> None:
    host, utterance = _utterance("Fine. Broken.", FakePlanner(fail_on="Broken."))
    items = audio_items(utterance)
    with pytest.raises(ProtocolError) as err:
        async for _ in items:
            pass
    assert err.value.code == ErrorCode.INVALID_SSML
    host.scheduler.stop()


async def test_sse_carries_the_format_word_times_and_base64_audio_in_order() -> None:
    host, utterance = _utterance("One two. Three.")
    items = audio_items(utterance)
    first = await anext(items)
    events = [
        json.loads(chunk.decode()[len("data: ") :])
        async for chunk in sse_body(utterance.request, first, items)
    ]
    assert events[0] == {"type": "audio_start", "format": "pcm", "sample_rate": 24_000}
    assert events[1]["type"] == "alignment" and events[1]["words"][0]["word"] == "One"
    audio = [e for e in events if e["type"] == "audio_chunk"]
    assert [e["seq"] for e in audio] == list(range(len(audio)))
    assert sum(len(base64.b64decode(e["data"])) for e in audio) > 0
    assert events[-1] == {"type": "audio_end", "chunks": len(audio)}
    host.scheduler.stop()


async def test_the_audio_body_is_the_pcm_of_every_window() -> None:
    host, utterance = _utterance("One. Two.")
    items = audio_items(utterance)
    first = await anext(items)
    body = b"".join([chunk async for chunk in audio_body(utterance.request, first, items)])
    samples = np.frombuffer(body, dtype=np.int16)
    assert samples.size >= 4 * 2_400  # two pieces of two windows, and their pauses
    await asyncio.sleep(0)
    host.scheduler.stop()
