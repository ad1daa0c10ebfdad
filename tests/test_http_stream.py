"""HTTP answers from an utterance: audio and word times in order, the one error raised, each body's shape
(``http_body``: the audio alone, SSE, marks per chunk, gathered whole, an error event after the headers)."""

from __future__ import annotations

import asyncio
import base64
import json
import socket

import httpx
import numpy as np
import pytest

from streamvoice.engine import KokoroEngine
from streamvoice.engine.voices import VoiceSpec
from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.lane import Lane
from streamvoice.server.core.piece_audio import Words
from streamvoice.server.core.requests import ResolvedRequest
from streamvoice.server.core.utterance import Utterance
from streamvoice.server.surfaces.http_body import Body, Gathered, Marked, rendered
from streamvoice.server.surfaces.http_stream import audio_items
from streamvoice.server.surfaces.invocations import Events
from streamvoice.server.surfaces.openai.speech import SpeechEvents
from tests.fakes import FakeEngine, FakeHost, FakePieceSource
from tests.helpers import (
    metric,
    start_speech_server,
    wait_for,
)


def _utterance(text: str, planner: FakePieceSource | None = None) -> tuple[FakeHost, Utterance]:
    host = FakeHost(engine=FakeEngine(windows_per_piece=2, window_samples=2_400, words=True))
    host.scheduler.start()
    request = ResolvedRequest(VoiceSpec((("af_heart", 1.0),)), 1.0, "pcm", "en-us", text=text)
    utterance = Utterance(planner or FakePieceSource(), request, Lane(host))
    utterance.say()
    return host, utterance


async def _body(utterance: Utterance, body: Body) -> list[bytes]:
    return [frame async for frame in rendered(audio_items(utterance, utterance.request, lambda: None), body)]


async def test_items_are_word_times_then_audio_per_piece() -> None:
    host, utterance = _utterance("One two. Three.")
    first_audio: list[int] = []
    items = [
        i
        async for i in audio_items(utterance, utterance.request, lambda: first_audio.append(len(first_audio)))
    ]
    kinds = ["words" if isinstance(i, Words) else "audio" for i in items]
    assert kinds[:3] == ["words", "audio", "audio"] and kinds.count("words") == 2
    assert first_audio == [0]  # the time-to-first-audio metric: once per answer
    host.scheduler.stop()


async def test_the_utterances_error_is_raised_to_the_http_caller() -> None:
    host, utterance = _utterance("Fine. Broken.", FakePieceSource(fail_on="Broken."))
    items = audio_items(utterance, utterance.request, lambda: None)
    with pytest.raises(ProtocolError) as err:
        async for _ in items:
            pass
    assert err.value.code == ErrorCode.INVALID_SSML
    host.scheduler.stop()


async def test_sse_carries_the_format_word_times_and_base64_audio_in_order() -> None:
    host, utterance = _utterance("One two. Three.")
    frames = await _body(utterance, Events(utterance.request))
    events = [json.loads(frame.decode()[len("data: ") :]) for frame in frames]
    assert events[0] == {"type": "audio_start", "format": "pcm", "sample_rate": 24_000}
    assert events[1]["type"] == "alignment" and events[1]["words"][0]["word"] == "One"
    audio = [e for e in events if e["type"] == "audio_chunk"]
    assert [e["seq"] for e in audio] == list(range(len(audio)))
    assert sum(len(base64.b64decode(e["data"])) for e in audio) > 0
    assert events[-1] == {"type": "audio_end", "chunks": len(audio)}
    host.scheduler.stop()


async def test_marks_ride_on_the_chunk_their_piece_begins_in_and_gather_whole() -> None:
    host, utterance = _utterance("One two. Three.")
    words = lambda w: [t.word for t in w.times]  # noqa: E731
    lines = await _body(utterance, Marked(words, lambda data, marks: json.dumps([len(data), marks]).encode()))
    sizes_and_marks = [json.loads(line) for line in lines]
    with_marks = [marks for _, marks in sizes_and_marks if marks]
    assert with_marks == [["One", "two."], ["Three."]] and sizes_and_marks[0][1] == ["One", "two."]
    host.scheduler.stop()
    host, utterance = _utterance("One two. Three.")
    gathered = Gathered(words)
    assert await _body(utterance, gathered) == []  # nothing is written before it is whole
    assert gathered.found == ["One", "two.", "Three."]
    assert len(gathered.whole) == sum(size for size, _ in sizes_and_marks)
    host.scheduler.stop()


async def test_the_audio_body_is_the_pcm_of_every_window() -> None:
    host, utterance = _utterance("One. Two.")
    body = b"".join(await _body(utterance, Body()))
    samples = np.frombuffer(body, dtype=np.int16)
    assert samples.size >= 4 * 2_400  # two pieces of two windows, and their pauses
    await asyncio.sleep(0)
    host.scheduler.stop()


async def test_a_failure_after_the_headers_ends_an_event_body_and_cuts_the_audio_short() -> None:
    host, utterance = _utterance("Fine. Broken.", FakePieceSource(fail_on="Broken."))
    frames = await _body(utterance, SpeechEvents("Fine. Broken."))
    last = json.loads(frames[-1].decode()[len("data: ") :])
    assert last["type"] == "error" and last["error"]["code"] == "invalid_ssml"
    assert all(b"speech.audio.done" not in frame for frame in frames)
    host.scheduler.stop()
    host, utterance = _utterance("Fine. Broken.", FakePieceSource(fail_on="Broken."))
    with pytest.raises(ProtocolError):  # the audio alone has no way to say it: the body stops short
        await _body(utterance, Body())
    host.scheduler.stop()


async def test_unread_http_stream_is_counted_and_timed_out(engine: KokoroEngine) -> None:
    # small kernel buffers on both ends (set before connecting, so the window is small from the start):
    # a send blocks after a second or two of audio, not after the minute default buffers hold
    server = await asyncio.to_thread(
        start_speech_server, engine, sndbuf=4096, warm_up=False, send_timeout_s=1.0, max_sessions=1
    )
    try:
        text = "A long answer for a client that never reads the body it asked for. " * 40
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", server.port))
        body = json.dumps({"text": text}).encode()
        sock.sendall(
            b"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await wait_for(lambda: metric(server, "streamvoice_active_streams") == 1)
        busy = httpx.post(server.url + "/invocations", json={"text": "Me too."})
        assert busy.status_code == 503 and busy.json()["error"]["code"] == "server_busy"
        assert busy.headers["retry-after"]
        await wait_for(lambda: 'code="slow_consumer"' in httpx.get(server.url + "/metrics").text)
        await wait_for(lambda: metric(server, "streamvoice_active_streams") == 0)
        sock.close()
        ok = httpx.post(server.url + "/invocations", json={"text": "My turn."}, timeout=60)
        assert ok.status_code == 200 and len(ok.content) > 0
    finally:
        await asyncio.to_thread(server.stop)
