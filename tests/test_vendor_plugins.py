"""LiveKit's own ElevenLabs, Cartesia and Deepgram plugins (1.8.9, unmodified), their base URL pointed at
the real speech server: streamed word by word at an LLM's pace, one-shot, and barge-in."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import numpy as np
import pytest
from livekit.agents import APIConnectOptions
from livekit.plugins import cartesia, deepgram, elevenlabs

from streamvoice.bench.wer import word_error_rate
from tests.helpers import RunningServer, livekit_audio, metric, start_speech_server, wait_for

TOKEN = "vendor-key"
NO_RETRY = APIConnectOptions(max_retry=0, timeout=20)
REPLY = (
    "Sure, I can help with that. I booked a table for two at the harbour restaurant, at eight tonight, "
    "and I will send the details to your phone."
)
LONG = " ".join(
    ["Let me read you the whole menu, from the starters to the desserts, one dish at a time."] * 6
)


@pytest.fixture(scope="module")
def vendor_server(engine) -> Iterator[RunningServer]:  # type: ignore[no-untyped-def]
    # Four listeners: a pooled connection keeps its slot between answers, as on a real deployment.
    server = start_speech_server(engine, auth_token=TOKEN, admission_listeners=4)
    yield server
    server.stop()


def plugins(url: str, http: aiohttp.ClientSession) -> dict[str, Any]:
    """Each plugin as its README says to build it, only the base URL and the key changed."""
    return {
        "elevenlabs": elevenlabs.TTS(base_url=f"{url}/v1", api_key=TOKEN, http_session=http),
        "cartesia": cartesia.TTS(base_url=url, api_key=TOKEN, http_session=http),
        "deepgram": deepgram.TTS(base_url=f"{url}/v1/speak", api_key=TOKEN, http_session=http),
    }


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def tokens(text: str) -> list[str]:
    words = text.split(" ")
    return [words[0]] + [" " + w for w in words[1:]]


async def stream_words(plugin: Any, text: str, pace_s: float = 0.1) -> tuple[np.ndarray, list[Any]]:
    """The words pushed at an LLM's pace; the input is ended only once the first audio has come (a server
    that waited for the end would never answer)."""
    stream = plugin.stream(conn_options=NO_RETRY)
    heard_first = asyncio.Event()
    reader = asyncio.create_task(livekit_audio(stream, heard_first))
    for token in tokens(text):
        stream.push_text(token)
        await asyncio.sleep(pace_s)
    await asyncio.wait_for(heard_first.wait(), 60)
    stream.end_input()
    audio, words = await reader
    await stream.aclose()
    return audio, words


@pytest.mark.slow
@pytest.mark.parametrize("vendor", ["elevenlabs", "cartesia", "deepgram"])
async def test_streamed_words_are_heard_before_the_text_ends(
    vendor: str, vendor_server: RunningServer, http: aiohttp.ClientSession, transcriber
) -> None:  # type: ignore[no-untyped-def]
    plugin = plugins(vendor_server.url, http)[vendor]
    audio, words = await stream_words(plugin, REPLY)  # heard before the text ends
    await plugin.aclose()
    heard = transcriber.transcribe(audio, plugin.sample_rate)
    assert word_error_rate(REPLY, heard) < 0.2, heard
    if vendor == "cartesia":  # word timestamps by default; they must sit where Whisper hears the words
        ours = [(w.strip(), w.start_time * 1000) for w in words if w.strip()]
        whisper = transcriber.words(audio, plugin.sample_rate)
        assert [w for w, _ in ours][:4] == ["Sure,", "I", "can", "help"]
        for (_, ours_ms), (_, whisper_ms, _) in zip(ours[:6], whisper[:6], strict=False):
            assert abs(ours_ms - whisper_ms) < 350, (ours[:6], whisper[:6])


@pytest.mark.slow
@pytest.mark.parametrize("vendor", ["elevenlabs", "cartesia", "deepgram"])
async def test_one_shot_synthesis(
    vendor: str, vendor_server: RunningServer, http: aiohttp.ClientSession, transcriber
) -> None:  # type: ignore[no-untyped-def]
    plugin = plugins(vendor_server.url, http)[vendor]
    async with plugin.synthesize(REPLY, conn_options=NO_RETRY) as chunked:
        audio, _ = await livekit_audio(chunked)
    await plugin.aclose()
    heard = transcriber.transcribe(audio, plugin.sample_rate)
    assert word_error_rate(REPLY, heard) < 0.2, heard


async def first_audio(plugin: Any, text: str) -> None:
    """A streamed answer read up to its first audio, then closed (what a barge-in does)."""
    stream = plugin.stream(conn_options=NO_RETRY)
    for token in tokens(text):
        stream.push_text(token)
    stream.end_input()
    async for event in stream:
        if len(event.frame.data):
            break
    await stream.aclose()


@pytest.mark.slow
@pytest.mark.parametrize("vendor", ["elevenlabs", "cartesia", "deepgram"])
async def test_barge_in_stops_the_old_answer_and_serves_the_next(
    vendor: str, vendor_server: RunningServer, http: aiohttp.ClientSession
) -> None:
    """A long answer interrupted after its first audio (the framework closes the stream: LiveKit's
    barge-in) stops decoding: the server decodes far less than its ~33 s, and the next answer is served
    (before, it waited behind the rest). How fast the next answer starts beside a fresh one:
    ``python -m streamvoice.bench.barge_in``."""
    plugin = plugins(vendor_server.url, http)[vendor]
    before = metric(vendor_server, "streamvoice_audio_seconds_total", TOKEN)
    await first_audio(plugin, LONG)
    await first_audio(plugin, "Of course. What would you like instead?")
    await plugin.aclose()
    await wait_for(lambda: metric(vendor_server, "streamvoice_queue_depth", TOKEN) == 0)
    decoded = metric(vendor_server, "streamvoice_audio_seconds_total", TOKEN) - before
    assert decoded < 18, f"{vendor}: {decoded:.1f} s of audio decoded for an answer cut after its first"
