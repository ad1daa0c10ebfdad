"""The LiveKit Agents plugin, driven by the real ``livekit-agents`` package offline (no LiveKit server)."""

from __future__ import annotations

import asyncio

import pytest
from livekit.agents import APIConnectOptions, APIError

from streamvoice.bench.wer import word_error_rate
from streamvoice.integrations.livekit import TTS
from tests.helpers import RunningServer, livekit_audio, start_speech_server

NO_RETRY = APIConnectOptions(max_retry=0, timeout=20)
REPLY = "Sure. I booked a table for two at the harbour restaurant, at eight o'clock tonight."


def tokens(text: str) -> list[str]:
    """What an LLM streams: word-sized deltas with their leading space."""
    words = text.split(" ")
    return [words[0]] + [" " + w for w in words[1:]]


@pytest.mark.slow
async def test_stream_speaks_before_end_input_with_timed_words(
    speech_server: RunningServer, transcriber
) -> None:  # type: ignore[no-untyped-def]
    plugin = TTS(base_url=speech_server.url, voice="af_heart")
    assert plugin.capabilities.streaming and plugin.capabilities.aligned_transcript
    stream = plugin.stream(conn_options=NO_RETRY)
    heard_first = asyncio.Event()
    reader = asyncio.create_task(livekit_audio(stream, heard_first))
    for token in tokens(REPLY):  # ~8 tokens a second, like a small local LLM
        stream.push_text(token)
        await asyncio.sleep(0.12)
    # the first audio frame comes before end_input: the test waits for it before ending the input
    await asyncio.wait_for(heard_first.wait(), 60)
    stream.end_input()
    audio, words = await reader
    await stream.aclose()
    await plugin.aclose()
    assert word_error_rate(REPLY, transcriber.transcribe(audio)) < 0.25
    assert [w.strip() for w in words][:3] == ["Sure.", "I", "booked"]
    starts = [w.start_time for w in words]
    assert starts == sorted(starts) and words[-1].end_time <= audio.size / 24_000 + 0.05
    # the last word's time is where the listener hears it: within the audio's last second
    assert words[-1].end_time > audio.size / 24_000 - 1.0


@pytest.mark.slow
async def test_synthesize_uses_the_http_route(speech_server: RunningServer, transcriber) -> None:  # type: ignore[no-untyped-def]
    plugin = TTS(base_url=speech_server.url, voice="am_michael", speed=1.1)
    async with plugin.synthesize(REPLY, conn_options=NO_RETRY) as stream:
        audio, _ = await livekit_audio(stream)
    await plugin.aclose()
    assert word_error_rate(REPLY, transcriber.transcribe(audio)) < 0.25


async def test_errors_surface_as_livekit_api_errors(speech_server: RunningServer) -> None:
    plugin = TTS(base_url=speech_server.url, voice="af_hart")
    with pytest.raises(APIError, match="unknown_voice"):
        async with plugin.synthesize("Hello.", conn_options=NO_RETRY) as chunked:
            await livekit_audio(chunked)
    stream = plugin.stream(conn_options=NO_RETRY)
    stream.push_text("Hello there, how are you?")
    stream.end_input()
    with pytest.raises(APIError, match="unknown_voice"):
        await livekit_audio(stream)
    await stream.aclose()
    unreachable = TTS(base_url="http://127.0.0.1:9")
    with pytest.raises(APIError, match="cannot"):
        async with unreachable.synthesize("Hello.", conn_options=NO_RETRY) as chunked:
            await livekit_audio(chunked)


@pytest.mark.slow
async def test_interrupting_one_stream_leaves_the_other_whole(engine, transcriber) -> None:  # type: ignore[no-untyped-def]
    # Two listeners at once: admission must count two whatever this machine measures (counting one, the
    # second stream is refused at once: the first has ~20 s of text to say, past the queue's wait).
    server = await asyncio.to_thread(start_speech_server, engine, admission_listeners=2)
    try:
        await _interrupt_one(server, transcriber)
    finally:
        await asyncio.to_thread(server.stop)


async def _interrupt_one(speech_server: RunningServer, transcriber) -> None:  # type: ignore[no-untyped-def]
    plugin = TTS(base_url=speech_server.url, voice="af_heart")
    interrupted, kept = plugin.stream(conn_options=NO_RETRY), plugin.stream(conn_options=NO_RETRY)
    long_text = " ".join([REPLY] * 4)
    interrupted.push_text(long_text)
    interrupted.end_input()
    kept.push_text(REPLY)
    kept.end_input()
    keeper = asyncio.create_task(livekit_audio(kept))
    async for _ in interrupted:  # the user barges in after the first frame
        break
    await interrupted.aclose()
    audio, _ = await keeper
    await kept.aclose()
    await plugin.aclose()
    assert word_error_rate(REPLY, transcriber.transcribe(audio)) < 0.25


@pytest.mark.slow
async def test_a_pushed_sentence_that_stops_is_spoken_before_end_input(speech_server: RunningServer) -> None:
    plugin = TTS(base_url=speech_server.url, voice="af_heart")
    stream = plugin.stream(conn_options=NO_RETRY)
    heard_first = asyncio.Event()
    reader = asyncio.create_task(livekit_audio(stream, heard_first))
    for token in tokens("I can book a table for four people at seven thirty this evening."):
        stream.push_text(token)
        await asyncio.sleep(0.12)
    # the LLM has stopped writing but has not said so: spoken after the quiet, without end_input
    await asyncio.wait_for(heard_first.wait(), 60)
    stream.end_input()
    audio, _ = await reader
    await stream.aclose()
    await plugin.aclose()
    assert audio.size > 24_000
