"""Section 8's trials, one per surface: the same reply through each wire as its own clients send it, timed
as the listener hears it (``bench.integrations`` runs them). Each returns when the request was sent, every
audio arrival, the PCM, and (streamed text) when the last word was sent."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from streamvoice.bench.common import FOUR_SENTENCES
from streamvoice.client import SpeechClient

Arrivals = list[tuple[float, int]]
Trial = tuple[float, Arrivals, bytes, float | None]  # started, arrivals, pcm, text finished at (streamed)


async def session(url: str, _: int, __: float) -> Trial:
    async with await SpeechClient.connect(url) as client:
        started = time.perf_counter()
        result = await client.speak(FOUR_SENTENCES, format="pcm")
    return started, result.arrivals, result.audio, None


async def _http_raw(url: str, path: str, body: dict[str, Any]) -> Trial:
    arrivals, pcm = [], bytearray()
    async with httpx.AsyncClient(timeout=120) as http:
        started = time.perf_counter()
        async with http.stream("POST", url + path, json=body) as r:
            r.raise_for_status()
            async for chunk in r.aiter_raw():
                arrivals.append((time.perf_counter(), len(chunk)))
                pcm += chunk
    return started, arrivals, bytes(pcm), None


async def invocations(url: str, _: int, __: float) -> Trial:
    return await _http_raw(url, "/invocations", {"text": FOUR_SENTENCES, "format": "pcm"})


async def openai_raw(url: str, _: int, __: float) -> Trial:
    import openai

    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    arrivals, pcm = [], bytearray()
    started = time.perf_counter()
    async with client.audio.speech.with_streaming_response.create(
        model="kokoro", voice="af_heart", input=FOUR_SENTENCES, response_format="pcm"
    ) as response:
        async for chunk in response.iter_bytes():
            arrivals.append((time.perf_counter(), len(chunk)))
            pcm += chunk
    await client.close()
    return started, arrivals, bytes(pcm), None


async def _lines(url: str, path: str, body: dict[str, Any], audio_of: Callable[[str], bytes | None]) -> Trial:
    arrivals, pcm = [], bytearray()
    async with httpx.AsyncClient(timeout=120) as http:
        started = time.perf_counter()
        async with http.stream("POST", url + path, json=body) as r:
            r.raise_for_status()
            async for line in r.aiter_lines():
                data = audio_of(line)
                if data:
                    arrivals.append((time.perf_counter(), len(data)))
                    pcm += data
    return started, arrivals, bytes(pcm), None


def _sse_audio(line: str) -> bytes | None:
    if not line.startswith("data: "):
        return None
    event = json.loads(line[6:])
    return base64.b64decode(event["audio"]) if event.get("type") == "speech.audio.delta" else None


async def openai_sse(url: str, _: int, __: float) -> Trial:
    body = {"input": FOUR_SENTENCES, "model": "kokoro", "voice": "af_heart", "response_format": "pcm"}
    return await _lines(url, "/v1/audio/speech", {**body, "stream_format": "sse"}, _sse_audio)


async def captioned(url: str, _: int, __: float) -> Trial:
    body = {"input": FOUR_SENTENCES, "voice": "af_heart", "response_format": "pcm"}
    return await _lines(
        url, "/dev/captioned_speech", body, lambda line: base64.b64decode(json.loads(line)["audio"])
    )


async def _wyoming(port: int, events: list[Any], delay: float) -> Trial:
    from wyoming.audio import AudioChunk
    from wyoming.client import AsyncTcpClient

    arrivals, pcm = [], bytearray()
    done_sending: list[float] = []
    async with AsyncTcpClient("127.0.0.1", port) as client:

        async def send() -> None:
            for event in events:
                await client.write_event(event)
                if delay and event.type == "synthesize-chunk":
                    await asyncio.sleep(delay)
            done_sending.append(time.perf_counter())

        started = time.perf_counter()
        sender = asyncio.create_task(send())
        end = "synthesize-stopped" if delay else "audio-stop"
        while (event := await client.read_event()) is not None and event.type != end:
            if AudioChunk.is_type(event.type):
                chunk = AudioChunk.from_event(event).audio
                arrivals.append((time.perf_counter(), len(chunk)))
                pcm += chunk
        await sender
    return started, arrivals, bytes(pcm), done_sending[0] if delay else None


async def wyoming_one_shot(_: str, port: int, __: float) -> Trial:
    from wyoming.tts import Synthesize

    return await _wyoming(port, [Synthesize(text=FOUR_SENTENCES).event()], 0.0)


def words() -> list[str]:
    parts = FOUR_SENTENCES.split(" ")
    return [parts[0]] + [" " + w for w in parts[1:]]


async def wyoming_streaming(_: str, port: int, rate: float) -> Trial:
    from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop

    events = [SynthesizeStart().event(), *(SynthesizeChunk(text=w).event() for w in words())]
    events += [Synthesize(text=FOUR_SENTENCES).event(), SynthesizeStop().event()]  # as Home Assistant does
    return await _wyoming(port, events, 1.0 / rate)


async def livekit_stream(url: str, _: int, rate: float) -> Trial:
    from livekit.agents import APIConnectOptions

    from streamvoice.integrations.livekit import TTS

    plugin = TTS(base_url=url)
    stream = plugin.stream(conn_options=APIConnectOptions(max_retry=0))
    arrivals, pcm = [], bytearray()

    async def read() -> None:
        async for event in stream:
            data = bytes(event.frame.data)
            arrivals.append((time.perf_counter(), len(data)))
            pcm.extend(data)

    reader = asyncio.create_task(read())
    started = time.perf_counter()
    for word in words():
        stream.push_text(word)
        await asyncio.sleep(1.0 / rate)
    text_done = time.perf_counter()
    stream.end_input()
    await reader
    await stream.aclose()
    await plugin.aclose()
    return started, arrivals, bytes(pcm), text_done


# A frame from the server: audio bytes it carries (None: none), and whether the answer is done.
Reading = Callable[[str | bytes], tuple[bytes | None, bool]]


async def _streamedws_url(
    url: str,
    headers: dict[str, str],
    first: list[str],
    each: Callable[[str], str],
    last: list[str],
    read: Reading,
    rate: float,
) -> Trial:
    """The reply written word by word into a WebSocket wire (raw frames, as its SDK sends them)."""
    import websockets

    arrivals: Arrivals = []
    pcm = bytearray()
    async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:

        async def reader() -> None:
            async for frame in ws:
                audio, done = read(frame)
                if audio:
                    arrivals.append((time.perf_counter(), len(audio)))
                    pcm.extend(audio)
                if done:
                    return

        task = asyncio.create_task(reader())
        started = time.perf_counter()
        for frame in first:
            await ws.send(frame)
        for word in words():
            await ws.send(each(word))
            await asyncio.sleep(1.0 / rate)
        text_done = time.perf_counter()
        for frame in last:
            await ws.send(frame)
        await asyncio.wait_for(task, 120)
    return started, arrivals, bytes(pcm), text_done


# A frame: the stopped answer's audio in it (None: none), and whether the wire acknowledged the interrupt.
Stopped = Callable[[str | bytes], tuple[bytes | None, bool]]


def binary_or(ack: str) -> Stopped:
    def read(frame: str | bytes) -> tuple[bytes | None, bool]:
        if isinstance(frame, bytes):
            return frame, False
        return None, json.loads(frame).get("type") == ack

    return read


def ws_url(url: str) -> str:
    return url.replace("http", "ws", 1)


async def session_streamed(url: str, _: int, rate: float) -> Trial:
    def read(frame: str | bytes) -> tuple[bytes | None, bool]:
        if isinstance(frame, bytes):
            return frame, False
        return None, json.loads(frame).get("type") in ("synthesis_complete", "error")

    return await _streamedws_url(
        ws_url(url) + "/invocations-bidirectional-stream",
        {},
        [json.dumps({"type": "synthesize", "stream": True, "id": "r", "text": "", "format": "pcm"})],
        lambda w: json.dumps({"type": "append", "id": "r", "text": w}),
        [json.dumps({"type": "end", "id": "r"})],
        read,
        rate,
    )


async def elevenlabs_streamed(url: str, _: int, rate: float) -> Trial:
    def read(frame: str | bytes) -> tuple[bytes | None, bool]:
        body = json.loads(frame)
        return (base64.b64decode(body["audio"]) if body.get("audio") else None), body.get("isFinal") is True

    path = "/v1/text-to-speech/af_heart/multi-stream-input?output_format=pcm_24000"
    return await _streamedws_url(
        ws_url(url) + path,
        {"xi-api-key": "bench"},
        [json.dumps({"text": " ", "context_id": "r"})],
        lambda w: json.dumps({"text": w, "context_id": "r"}),
        [
            json.dumps({"text": "", "context_id": "r", "flush": True}),
            json.dumps({"context_id": "r", "close_context": True}),
        ],
        read,
        rate,
    )


async def cartesia_streamed(url: str, _: int, rate: float) -> Trial:
    base = {
        "model_id": "sonic-2",
        "context_id": "r",
        "voice": {"mode": "id", "id": "af_heart"},
        "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
    }

    def read(frame: str | bytes) -> tuple[bytes | None, bool]:
        body = json.loads(frame)
        audio = base64.b64decode(body["data"]) if body.get("type") == "chunk" else None
        return audio, body.get("type") in ("done", "error")

    return await _streamedws_url(
        ws_url(url) + "/tts/websocket",
        {"X-API-Key": "bench"},
        [],
        lambda w: json.dumps({**base, "transcript": w, "continue": True}),
        [json.dumps({**base, "transcript": "", "continue": False})],
        read,
        rate,
    )


async def _deepgram_streamed(path: str, url: str, rate: float) -> Trial:
    """Deepgram's ``/v1/speak`` or ``/v2/speak``: the same Speak / Flush, answered ``Flushed``."""
    return await _streamedws_url(
        ws_url(url) + path + "?model=af_heart&encoding=linear16&sample_rate=24000",
        {"Authorization": "Token bench"},
        [],
        lambda w: json.dumps({"type": "Speak", "text": w}),
        [json.dumps({"type": "Flush"})],
        binary_or("Flushed"),
        rate,
    )


async def deepgram_streamed(url: str, _: int, rate: float) -> Trial:
    return await _deepgram_streamed("/v1/speak", url, rate)


async def deepgram_flux_streamed(url: str, _: int, rate: float) -> Trial:
    return await _deepgram_streamed("/v2/speak", url, rate)


SURFACES: list[tuple[str, str, Callable[[str, int, float], Awaitable[Trial]]]] = [
    ("whole text", "session (WebSocket)", session),
    ("whole text", "POST /invocations", invocations),
    ("whole text", "OpenAI /v1/audio/speech, raw", openai_raw),
    ("whole text", "OpenAI /v1/audio/speech, SSE", openai_sse),
    ("whole text", "/dev/captioned_speech (NDJSON)", captioned),
    ("whole text", "Wyoming synthesize", wyoming_one_shot),
    ("streamed text", "Wyoming streaming (Home Assistant order)", wyoming_streaming),
    ("streamed text", "LiveKit plugin stream()", livekit_stream),
    ("streamed text", "session, streamed text (append)", session_streamed),
    ("streamed text", "ElevenLabs multi-stream-input", elevenlabs_streamed),
    ("streamed text", "Cartesia /tts/websocket (continue)", cartesia_streamed),
    ("streamed text", "Deepgram /v1/speak (Speak, Flush)", deepgram_streamed),
    ("streamed text", "Deepgram /v2/speak (Speak, Flush)", deepgram_flux_streamed),
]
