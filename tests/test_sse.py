"""The SSE reader acts only on complete events, however the transport cuts the bytes."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import httpx
import pytest

from streamvoice.agent.llm import ScriptedTextSource
from streamvoice.client.sse import SSEDecoder, iter_sse
from tests.helpers import (
    RunningServer,
    cpu_seconds,
    start_agent,
)


def decode_all(chunks: list[bytes]) -> list[str]:
    d = SSEDecoder()
    out = [e.data for c in chunks for e in d.feed(c)]
    return out + [e.data for e in d.flush()]


def test_line_endings_comments_and_multiline_data() -> None:
    stream = b': keep-alive\n\ndata: {"a": 1}\r\n\r\nevent: x\r\nid: 7\r\ndata: line1\r\ndata: line2\r\n\r\ndata: z\r\r'
    assert decode_all([stream]) == ['{"a": 1}', "line1\nline2", "z"]
    event = next(iter_sse([b"event: x\nid: 7\ndata: v\n\n"]))
    assert (event.event, event.id, event.data) == ("x", "7", "v")


def test_incomplete_final_event_is_dropped() -> None:
    assert decode_all([b"data: one\n\ndata: tw"]) == ["one"]


@pytest.fixture(scope="module")
def recorded_stream(scripted_server: RunningServer) -> bytes:
    """A real agent response, recorded off the wire."""
    agent = start_agent(
        ScriptedTextSource("Hi there. Short answer, é ü 漢字.", ttft_s=0.05, tokens_per_s=200),
        scripted_server.url,
    )
    try:
        with httpx.stream("POST", agent.url + "/invocations", json={"prompt": "hi"}, timeout=60) as r:
            body = b"".join(r.iter_raw())
    finally:
        agent.stop()
    events = body.split(b"\n\n")
    # Keep the stream small enough to cut at every offset: all control events plus a few audio chunks.
    kept = [e for e in events if b'"audio_chunk"' not in e][:-1]
    audio = [e for e in events if b'"audio_chunk"' in e][:2]
    audio = [e[:600] + e[-200:] if len(e) > 2000 else e for e in audio]  # shortened, still valid framing
    return b"\n\n".join(kept[:2] + audio + kept[2:]) + b"\n\n"


def test_recorded_stream_cut_at_every_offset(recorded_stream: bytes) -> None:
    expected = decode_all([recorded_stream])
    assert len(expected) >= 5 and json.loads(expected[1])["type"] == "agent_start"
    assert any("漢字" in e for e in expected)  # multi-byte characters survive cuts inside them
    for cut in range(len(recorded_stream) + 1):
        assert decode_all([recorded_stream[:cut], recorded_stream[cut:]]) == expected, cut


def test_recorded_stream_random_multi_cuts_and_crlf(recorded_stream: bytes) -> None:
    rng = random.Random(7)
    variants = [recorded_stream, recorded_stream.replace(b"\n", b"\r\n")]
    for stream in variants:
        expected = decode_all([recorded_stream])
        for _ in range(300):
            cuts = sorted(rng.sample(range(len(stream)), 6))
            bounds = [0, *cuts, len(stream)]
            chunks = [stream[a:b] for a, b in itertools.pairwise(bounds)]
            assert decode_all(chunks) == expected
    byte_by_byte = [recorded_stream[i : i + 1] for i in range(len(recorded_stream))]
    assert decode_all(byte_by_byte) == decode_all([recorded_stream])


def test_sse_decoder_is_linear_in_the_stream() -> None:
    def decode(size: int) -> list[Any]:
        decoder = SSEDecoder()
        data = f"data: {'x' * size}\n\n".encode()
        events = []
        for i in range(0, len(data), 512):  # one event in many small chunks
            events += decoder.feed(data[i : i + 512])
        return events

    assert [len(e.data) for e in decode(2_000_000)] == [2_000_000]
    # ten times the stream, about ten times the work: the rescanning reader took minutes on 2 MB
    assert cpu_seconds(lambda: decode(2_000_000), 2) < 30 * max(cpu_seconds(lambda: decode(200_000), 2), 1e-4)
