"""Home Assistant's Wyoming protocol, from the speech server's own process, driven by the ``wyoming``
package's client over TCP on loopback (the event order Home Assistant sends)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import numpy as np
import pytest
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Describe, Info
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

from streamvoice.asgi import free_port
from streamvoice.bench.wer import word_error_rate
from streamvoice.engine import KokoroEngine
from streamvoice.server.config import ConfigError, ServerConfig
from tests.helpers import RunningServer, metric, start_speech_server, wait_for

ANSWER = (
    "The kitchen lights are on. The thermostat is set to twenty one degrees, and the front door is locked."
)


@pytest.fixture(scope="module")
def wyoming_server(engine: KokoroEngine) -> Iterator[tuple[RunningServer, int]]:
    port = free_port()
    server = start_speech_server(engine, wyoming_uri=f"tcp://127.0.0.1:{port}")
    yield server, port
    server.stop()


async def read_until(
    client: AsyncTcpClient, done: str, timeout: float = 60.0, into: list[tuple[float, Event]] | None = None
) -> list[tuple[float, Event]]:
    """Events with their arrival times, up to and including the first of type ``done`` (appended to
    ``into`` as they come, when given)."""
    events: list[tuple[float, Event]] = [] if into is None else into
    async with asyncio.timeout(timeout):
        while True:
            event = await client.read_event()
            assert event is not None, "the server closed the connection"
            events.append((time.monotonic(), event))
            if event.type == done:
                return events


def pcm_of(events: list[tuple[float, Event]]) -> np.ndarray:
    chunks = [AudioChunk.from_event(e) for _, e in events if AudioChunk.is_type(e.type)]
    assert {(c.rate, c.width, c.channels) for c in chunks} == {(24_000, 2, 1)}  # one WAV header fits all
    return np.frombuffer(b"".join(c.audio for c in chunks), "<i2").astype(np.float32) / 32768


async def test_describe_lists_one_streaming_program_with_every_voice(
    wyoming_server: tuple[RunningServer, int],
) -> None:
    async with AsyncTcpClient("127.0.0.1", wyoming_server[1]) as client:
        await client.write_event(Describe().event())
        events = await read_until(client, "info")
    info = Info.from_event(events[-1][1])
    (program,) = info.tts
    assert program.supports_synthesize_streaming and program.installed
    assert len(program.voices) == 54
    heart = next(v for v in program.voices if v.name == "af_heart")
    assert heart.languages == ["en-us"]
    assert next(v for v in program.voices if v.name == "ff_siwis").languages == ["fr-fr"]


@pytest.mark.slow
async def test_one_shot_synthesize_is_one_audio_block(
    wyoming_server: tuple[RunningServer, int], transcriber
) -> None:  # type: ignore[no-untyped-def]
    async with AsyncTcpClient("127.0.0.1", wyoming_server[1]) as client:
        await client.write_event(Synthesize(text=ANSWER, voice=SynthesizeVoice(name="am_michael")).event())
        events = await read_until(client, "audio-stop")
    types = [e.type for _, e in events]
    assert types[0] == "audio-start" and types.count("audio-start") == 1 and types.count("audio-chunk") >= 3
    assert AudioStart.from_event(events[0][1]).rate == 24_000
    heard = transcriber.transcribe(pcm_of(events))
    assert word_error_rate(ANSWER, heard) < 0.25, heard


@pytest.mark.slow
async def test_streaming_speaks_before_the_text_ends_as_home_assistant_sends_it(
    wyoming_server: tuple[RunningServer, int], transcriber
) -> None:  # type: ignore[no-untyped-def]
    """Home Assistant: synthesize-start, one chunk per LLM delta, the whole text again as synthesize, then
    synthesize-stop; it reads audio until synthesize-stopped."""
    deltas = [w + " " for w in ANSWER.split()]
    async with AsyncTcpClient("127.0.0.1", wyoming_server[1]) as client:
        await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name="af_heart")).event())
        events: list[tuple[float, Event]] = []
        reader = asyncio.create_task(read_until(client, "synthesize-stopped", timeout=120, into=events))
        for delta in deltas:  # an LLM writing ~7 words a second
            await client.write_event(SynthesizeChunk(text=delta).event())
            await asyncio.sleep(0.15)
        await client.write_event(Synthesize(text=ANSWER, voice=SynthesizeVoice(name="af_heart")).event())
        # audio starts while the text is still open: the test waits for it before it stops the stream
        await wait_for(lambda: any(AudioChunk.is_type(e.type) for _, e in events))
        await client.write_event(SynthesizeStop().event())
        await reader
    assert SynthesizeStopped.is_type(events[-1][1].type)
    types = [e.type for _, e in events]
    assert types.count("audio-start") == types.count("audio-stop") >= 2  # a block per piece, like piper
    assert types.index("audio-start") < types.index("audio-chunk")
    heard = transcriber.transcribe(pcm_of(events))
    assert word_error_rate(ANSWER, heard) < 0.25, heard  # said once: the repeated synthesize was ignored


async def test_bad_input_gets_wyoming_errors_and_the_stream_still_stops(
    wyoming_server: tuple[RunningServer, int],
) -> None:
    async with AsyncTcpClient("127.0.0.1", wyoming_server[1]) as client:
        await client.write_event(Synthesize(text="Hi.", voice=SynthesizeVoice(name="af_hart")).event())
        ((_, event),) = await read_until(client, "error")
        error = Error.from_event(event)
        assert error.code == "unknown_voice" and "af_heart" in error.text
        await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name="nobody")).event())
        await client.write_event(SynthesizeChunk(text="Hello there.").event())  # dropped: no stream
        await client.write_event(SynthesizeStop().event())
        events = await read_until(client, "synthesize-stopped")
        assert [e.type for _, e in events] == ["error", "synthesize-stopped"]  # the stop is still answered
        await client.write_event(Synthesize(text="?!").event())
        ((_, event),) = await read_until(client, "error")
        assert Error.from_event(event).code == "empty_text"
        await client.write_event(SynthesizeChunk(text="stray").event())
        ((_, event),) = await read_until(client, "error")
        assert Error.from_event(event).code == "invalid_message"
        await client.write_event(Describe().event())  # the connection is still usable
        await read_until(client, "info")


@pytest.mark.slow
async def test_a_closed_socket_cancels_the_work(wyoming_server: tuple[RunningServer, int]) -> None:
    server, port = wyoming_server
    long_text = " ".join([ANSWER] * 8)
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Synthesize(text=long_text).event())
        await read_until(client, "audio-chunk")
    # Home Assistant cancels by closing: the stream ends and no more model work is queued for it.
    await wait_for(lambda: metric(server, "streamvoice_active_streams") == 0)
    await wait_for(lambda: metric(server, "streamvoice_queue_depth") == 0)
    async with AsyncTcpClient("127.0.0.1", port) as client:  # and the next caller is served at once
        await client.write_event(Synthesize(text="Still here.").event())
        events = await read_until(client, "audio-stop", timeout=30)
    assert AudioStop.is_type(events[-1][1].type)


def test_wyoming_uri_is_checked_at_start() -> None:
    with pytest.raises(ConfigError, match="tcp://HOST:PORT"):
        ServerConfig(wyoming_uri="http://localhost:10200")
    with pytest.raises(ConfigError, match="tcp://HOST:PORT"):
        ServerConfig(wyoming_uri="tcp://localhost")
    assert ServerConfig(wyoming_uri="tcp://127.0.0.1:10200").wyoming_uri


async def test_a_streamed_sentence_that_stops_is_spoken_without_the_stop(
    wyoming_server: tuple[RunningServer, int],
) -> None:
    """Home Assistant's order, one chunk per word 120 ms apart, then no more text: the sentence is spoken
    once the text has been quiet for STREAM_QUIET_CUT_MS (before: no audio in 20 s, until the stop)."""
    reply = "I can book a table for four people at seven thirty this evening."
    async with AsyncTcpClient("127.0.0.1", wyoming_server[1]) as client:
        await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name="af_heart")).event())
        for word in reply.split(" "):
            await client.write_event(SynthesizeChunk(text=word + " ").event())
            await asyncio.sleep(0.12)
        # then no more text: its audio comes without the stop (how soon: python -m streamvoice.bench.integrations)
        async with asyncio.timeout(60):
            while (event := await client.read_event()) is not None and not AudioChunk.is_type(event.type):
                pass
        assert event is not None
        await client.write_event(SynthesizeStop().event())
        rest = await read_until(client, "synthesize-stopped", timeout=60)
    assert SynthesizeStopped.is_type(rest[-1][1].type)
