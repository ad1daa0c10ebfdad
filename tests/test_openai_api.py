"""OpenAI's speech API on the speech server, driven by the real ``openai`` SDK and LiveKit's OpenAI plugin."""

from __future__ import annotations

import base64
import io
import json
import re

import av
import httpx
import numpy as np
import openai
import pytest

from streamvoice.bench.wer import word_error_rate
from streamvoice.protocol import ErrorCode, Limits, ProtocolError
from streamvoice.server.surfaces.openai.speech import OPENAI_VOICES, speech_request, usage
from streamvoice.text.normalize import say
from tests.helpers import RunningServer

KNOWN = frozenset({"af_heart", "am_michael", "af_alloy", "bf_emma"})
TEXT = "Good morning. Your table for four is booked for seven thirty tonight."


def decode(data: bytes, fmt: str) -> tuple[np.ndarray, int]:
    """Any container PyAV reads, as float32 mono and its rate."""
    if fmt == "pcm":
        return np.frombuffer(data, "<i2").astype(np.float32) / 32768, 24_000
    chunks, rate = [], 24_000
    with av.open(io.BytesIO(data), format={"opus": "ogg"}.get(fmt, fmt)) as container:
        for frame in container.decode(audio=0):
            rate = frame.sample_rate
            arr = frame.to_ndarray().astype(np.float32)
            chunks.append(arr.reshape(-1) / (32768 if frame.format.name.startswith("s16") else 1))
    return np.concatenate(chunks), rate


def client(server: RunningServer, **kw: object) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, **kw)  # type: ignore[arg-type]


# --- the request, checked (pure) ------------------------------------------------------------------------


def test_openai_voice_names_map_to_kokoro_voices() -> None:
    assert speech_request({"input": "Hi.", "voice": "shimmer"}, KNOWN, Limits()).voice == "af_sky"
    assert speech_request({"input": "Hi.", "voice": {"id": "bf_emma"}}, KNOWN, Limits()).voice == "bf_emma"
    blend = speech_request({"input": "Hi.", "voice": "af_heart(2)+am_michael(1)"}, KNOWN, Limits())
    assert blend.voice == "af_heart(2)+am_michael(1)"  # parsed (both syntaxes) by the engine's voice parser
    assert set(OPENAI_VOICES) >= {"alloy", "ash", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer"}


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        ({}, ErrorCode.MISSING_TEXT, "input"),
        ({"input": "?!"}, ErrorCode.EMPTY_TEXT, "input"),
        ({"input": "x" * 20}, ErrorCode.TEXT_TOO_LONG, "input"),
        ({"input": "Hi.", "response_format": "ogg"}, ErrorCode.UNSUPPORTED_FORMAT, "response_format"),
        ({"input": "Hi.", "speed": 4.0}, ErrorCode.INVALID_SPEED, "speed"),
        ({"input": "Hi.", "speed": "fast"}, ErrorCode.INVALID_SPEED, "speed"),
        ({"input": "Hi.", "stream_format": "chunks"}, ErrorCode.INVALID_FIELD, "stream_format"),
        ({"input": "Hi.", "voice": 3}, ErrorCode.INVALID_FIELD, "voice"),
    ],
)
def test_bad_requests_name_the_field(body: dict[str, object], code: ErrorCode, param: str) -> None:
    with pytest.raises(ProtocolError) as info:
        speech_request(body, KNOWN, Limits(max_text_chars=10))
    assert info.value.code == code and info.value.param == param


def test_speed_error_says_the_range_rather_than_clamping() -> None:
    with pytest.raises(ProtocolError, match=r"0\.5-2\.0"):
        speech_request({"input": "Hi.", "speed": 0.25}, KNOWN, Limits())


def test_usage_counts_words_and_25ms_frames() -> None:
    assert usage("three short words", 24_000, 24_000) == {
        "input_tokens": 3,
        "output_tokens": 40,
        "total_tokens": 43,
    }


# --- the real SDK over loopback -------------------------------------------------------------------------


@pytest.mark.slow
def test_sdk_speech_is_heard_as_the_input(speech_server: RunningServer, transcriber) -> None:  # type: ignore[no-untyped-def]
    response = client(speech_server).audio.speech.create(
        model="kokoro", voice="alloy", input=TEXT, response_format="wav", instructions="Speak warmly."
    )
    assert response.response.headers["content-type"] == "audio/wav"
    assert response.response.headers["x-request-id"]
    audio, rate = decode(response.content, "wav")
    heard = transcriber.transcribe(audio, rate)
    # Whisper writes the time it hears as digits ("730", "7:30"): read back into words by our own rules.
    heard = re.sub(r"\b(\d{1,2}):?(\d{2})\b", lambda m: say(f"{m[1]}:{m[2]}"), heard)
    assert word_error_rate(TEXT, heard) < 0.25, heard


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fmt", "ctype"),
    [
        ("mp3", "audio/mpeg"),
        ("opus", "audio/opus"),
        ("aac", "audio/aac"),
        ("flac", "audio/flac"),
        ("pcm", "audio/pcm"),
    ],
)
def test_sdk_streams_every_response_format(scripted_server: RunningServer, fmt: str, ctype: str) -> None:
    """Each format's shape through the SDK (the engine scripted: what it sounds like is
    ``test_sdk_speech_is_heard_as_the_input``'s)."""
    with client(scripted_server).audio.speech.with_streaming_response.create(
        model="tts-1",
        voice="af_heart",
        input=TEXT,
        response_format=fmt,  # type: ignore[arg-type]
    ) as response:
        assert response.headers["content-type"] == ctype
        chunks = list(response.iter_bytes())
    assert len(chunks) >= 2  # window by window, not one body at the end
    audio, rate = decode(b"".join(chunks), fmt)
    assert 3.0 < audio.size / rate < 8.0


@pytest.mark.slow
async def test_async_sdk_sse_is_chosen_by_the_body_and_parses(speech_server: RunningServer) -> None:
    from openai._streaming import SSEDecoder

    async_client = openai.AsyncOpenAI(base_url=speech_server.url + "/v1", api_key="unused", max_retries=0)
    deltas: list[bytes] = []
    done: dict[str, object] = {}
    async with async_client.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts", voice="nova", input=TEXT, response_format="pcm", stream_format="sse"
    ) as response:
        assert response.http_request.headers["accept"] == "application/octet-stream"  # the SDK's, ignored
        assert response.headers["content-type"].startswith("text/event-stream")
        async for event in SSEDecoder().aiter_bytes(response.iter_bytes()):
            payload = json.loads(event.data)
            if payload["type"] == "speech.audio.delta":
                deltas.append(base64.b64decode(payload["audio"]))
            else:
                assert payload["type"] == "speech.audio.done"
                done = payload
    await async_client.close()
    samples = sum(len(d) for d in deltas) // 2
    assert len(deltas) >= 2 and samples / 24_000 > 3.0
    assert done["usage"] == usage(TEXT, samples, 24_000)


def test_sdk_raises_bad_request_with_our_message(speech_server: RunningServer) -> None:
    sdk = client(speech_server)
    with pytest.raises(openai.BadRequestError) as info:
        sdk.audio.speech.create(model="kokoro", voice="af_heart", input="Hi.", speed=3.0)
    assert info.value.code == "invalid_speed" and "0.5-2.0" in info.value.message
    assert info.value.body["param"] == "speed"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as info:
        sdk.audio.speech.create(model="kokoro", voice="af_hart", input="Hi.")
    assert info.value.code == "unknown_voice" and "af_heart" in info.value.message


def test_voices_and_models_for_app_pickers(speech_server: RunningServer) -> None:
    voices = httpx.get(speech_server.url + "/v1/audio/voices").json()["voices"]
    assert {"id": "af_heart", "name": "af_heart"}.items() <= next(
        v for v in voices if v["id"] == "af_heart"
    ).items()
    assert len(voices) == 54
    assert "kokoro" in [m.id for m in client(speech_server).models.list()]


@pytest.mark.slow
def test_captioned_speech_streams_audio_with_word_times(speech_server: RunningServer) -> None:
    lines: list[dict[str, object]] = []
    with httpx.stream(
        "POST",
        speech_server.url + "/dev/captioned_speech",
        json={"input": TEXT, "voice": "af_heart", "response_format": "pcm"},
        timeout=60,
    ) as r:
        assert r.headers["content-type"].startswith("application/x-ndjson") and r.headers["x-request-id"]
        lines = [json.loads(line) for line in r.iter_lines() if line]
    stamps = [t for line in lines for t in line["timestamps"]]  # type: ignore[attr-defined]
    words = [t["word"] for t in stamps]
    assert words[:3] == ["Good", "morning.", "Your"] or words[:2] == ["Good", "morning"]
    starts = [t["start_time"] for t in stamps]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)  # neither duplicated nor out of order
    seconds = sum(len(base64.b64decode(line["audio"])) for line in lines) / 2 / 24_000  # type: ignore[arg-type]
    assert stamps[-1]["end_time"] <= seconds + 0.05
    whole = httpx.post(
        speech_server.url + "/dev/captioned_speech",
        json={"input": TEXT, "voice": "af_heart", "response_format": "wav", "stream": False},
        timeout=60,
    ).json()
    assert [t["word"] for t in whole["timestamps"]] == words
    assert decode(base64.b64decode(whole["audio"]), "wav")[0].size / 24_000 == pytest.approx(seconds, abs=0.2)


def test_bearer_token_guards_the_openai_routes(engine) -> None:  # type: ignore[no-untyped-def]
    from tests.helpers import start_speech_server

    server = start_speech_server(engine, auth_token="s3cret", warm_up=False)
    try:
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0).models.list()
        sdk = openai.OpenAI(base_url=server.url + "/v1", api_key="s3cret", max_retries=0)
        assert sdk.models.list().data
        response = sdk.audio.speech.create(
            model="kokoro", voice="echo", input="Hello.", response_format="pcm"
        )
        assert len(response.content) > 10_000
    finally:
        server.stop()


@pytest.mark.slow
async def test_livekit_openai_plugin_takes_both_paths(speech_server: RunningServer) -> None:
    """LiveKit's own OpenAI TTS: ``kokoro`` asks for SSE, ``tts-1`` for raw audio (livekit/agents#6184)."""
    from livekit.agents import APIConnectOptions
    from livekit.plugins import openai as lk_openai

    for model in ("kokoro", "tts-1"):
        tts = lk_openai.TTS(model=model, voice="af_heart", base_url=speech_server.url + "/v1", api_key="x")
        frames = 0
        async with tts.synthesize(TEXT, conn_options=APIConnectOptions(max_retry=0)) as stream:
            async for event in stream:
                frames += event.frame.samples_per_channel
        await tts.aclose()
        assert frames / 24_000 > 3.0, model
