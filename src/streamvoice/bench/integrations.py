"""8. Every surface, what the listener hears: first byte and heard onset through each integration.

One server (the model, scheduler and Wyoming listener in one process, as ``streamvoice serve
--wyoming-uri`` runs it), the same four-sentence reply through each surface, PCM at 24 kHz. Two groups:

- *whole text*: the reply arrives in one request (session message, ``POST /invocations``, OpenAI raw and
  SSE, Kokoro-FastAPI captioned speech, Wyoming ``synthesize``); timed from the request.
- *streamed text*: the reply arrives as an LLM writes it, word by word at ``--tokens-per-s`` (Wyoming's
  streaming events as Home Assistant sends them, the LiveKit plugin's ``stream()``, the session protocol's
  streamed message, and the ElevenLabs, Cartesia and Deepgram wires as their SDKs send them); timed from the first
  word, with when the last word was sent beside it: speech that starts before the text ends is the point.

Then *barge-in*, per socket wire: the reply is playing (1.5 s of its audio received) when the client stops it
the wire's own way (the session's ``cancel``, Cartesia's ``cancel``, Deepgram's ``Clear`` and ``Interrupt``,
ElevenLabs closing the context and opening the next); from the interrupt sent to the last audio byte of the
stopped answer received, and how much audio that was.

    python -m streamvoice.bench.integrations [--trials N] [--tokens-per-s R]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from streamvoice.asgi import free_port
from streamvoice.bench.common import FOUR_SENTENCES, heard_onset_s, stats, table, write_result
from streamvoice.bench.tables import md_table, md_value
from streamvoice.client import SpeechClient
from streamvoice.engine import KokoroEngine
from streamvoice.engine.voice_stats_cache import prepare
from streamvoice.server.core.config import ServerConfig
from streamvoice.server.runner import build_server

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


async def _streamed_ws(
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


def _ws(url: str) -> str:
    return url.replace("http", "ws", 1)


async def session_streamed(url: str, _: int, rate: float) -> Trial:
    def read(frame: str | bytes) -> tuple[bytes | None, bool]:
        if isinstance(frame, bytes):
            return frame, False
        return None, json.loads(frame).get("type") in ("synthesis_complete", "error")

    return await _streamed_ws(
        _ws(url) + "/invocations-bidirectional-stream",
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
    return await _streamed_ws(
        _ws(url) + path,
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

    return await _streamed_ws(
        _ws(url) + "/tts/websocket",
        {"X-API-Key": "bench"},
        [],
        lambda w: json.dumps({**base, "transcript": w, "continue": True}),
        [json.dumps({**base, "transcript": "", "continue": False})],
        read,
        rate,
    )


async def _deepgram_streamed(path: str, url: str, rate: float) -> Trial:
    """Deepgram's ``/v1/speak`` or ``/v2/speak``: the same Speak / Flush, answered ``Flushed``."""
    return await _streamed_ws(
        _ws(url) + path + "?model=af_heart&encoding=linear16&sample_rate=24000",
        {"Authorization": "Token bench"},
        [],
        lambda w: json.dumps({"type": "Speak", "text": w}),
        [json.dumps({"type": "Flush"})],
        _binary_or("Flushed"),
        rate,
    )


async def deepgram_streamed(url: str, _: int, rate: float) -> Trial:
    return await _deepgram_streamed("/v1/speak", url, rate)


async def deepgram_flux_streamed(url: str, _: int, rate: float) -> Trial:
    return await _deepgram_streamed("/v2/speak", url, rate)


# -- barge-in ----------------------------------------------------------------------------------------

PLAYED_BEFORE_S = 1.5  # of the reply's audio received when the client interrupts
QUIET_S = 1.0  # no frame for this long after the interrupt: the stopped answer has sent all it will

# A frame: the stopped answer's audio in it (None: none), and whether the wire acknowledged the interrupt.
Stopped = Callable[[str | bytes], tuple[bytes | None, bool]]
Barge = tuple[float, float, float | None]


async def _barge_in(
    url: str, headers: dict[str, str], opening: list[str], interrupt: list[str], read: Stopped
) -> Barge:
    """(ms from the interrupt to the last audio byte of the stopped answer, ms of audio after it, ms to the
    wire's acknowledgement or None where it sends none)."""
    import websockets

    async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
        for message in opening:
            await ws.send(message)
        received = 0
        while received < PLAYED_BEFORE_S * 24_000 * 2:
            audio, _ = read(await asyncio.wait_for(ws.recv(), 120))
            received += len(audio or b"")
        sent = time.perf_counter()
        for message in interrupt:
            await ws.send(message)
        last, after, acked = sent, 0, None
        frame: str | bytes
        while True:
            try:
                frame = await asyncio.wait_for(ws.recv(), QUIET_S)
            except TimeoutError:
                break
            audio, acknowledged = read(frame)
            if audio:
                last, after = time.perf_counter(), after + len(audio)
            if acknowledged:
                acked = (time.perf_counter() - sent) * 1000
                break
    return (last - sent) * 1000, after / 2 / 24_000 * 1000, acked


def _binary_or(ack: str) -> Stopped:
    def read(frame: str | bytes) -> tuple[bytes | None, bool]:
        if isinstance(frame, bytes):
            return frame, False
        return None, json.loads(frame).get("type") == ack

    return read


async def barge_session(url: str) -> Barge:
    opening = [json.dumps({"type": "synthesize", "id": "r", "text": FOUR_SENTENCES, "format": "pcm"})]
    interrupt = [json.dumps({"type": "cancel", "played_ms": PLAYED_BEFORE_S * 1000})]
    return await _barge_in(
        _ws(url) + "/invocations-bidirectional-stream", {}, opening, interrupt, _binary_or("cancelled")
    )


async def barge_elevenlabs(url: str) -> Barge:
    def read(frame: str | bytes) -> tuple[bytes | None, bool]:
        body = json.loads(frame)
        mine = body.get("contextId") == "r" and body.get("audio")
        return (base64.b64decode(body["audio"]) if mine else None), False

    path = "/v1/text-to-speech/af_heart/multi-stream-input?output_format=pcm_24000"
    opening = [
        json.dumps({"text": " ", "context_id": "r"}),
        json.dumps({"text": FOUR_SENTENCES, "context_id": "r", "flush": True}),
    ]
    interrupt = [
        json.dumps({"context_id": "r", "close_context": True}),
        json.dumps({"text": " ", "context_id": "next"}),
        json.dumps({"text": "Sure. ", "context_id": "next"}),
    ]
    return await _barge_in(_ws(url) + path, {"xi-api-key": "bench"}, opening, interrupt, read)


async def barge_cartesia(url: str) -> Barge:
    base = {
        "model_id": "sonic-2",
        "context_id": "r",
        "voice": {"mode": "id", "id": "af_heart"},
        "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000},
    }

    def read(frame: str | bytes) -> tuple[bytes | None, bool]:
        body = json.loads(frame)
        return (base64.b64decode(body["data"]) if body.get("type") == "chunk" else None), False

    opening = [json.dumps({**base, "transcript": FOUR_SENTENCES, "continue": False})]
    interrupt = [json.dumps({"context_id": "r", "cancel": True})]
    return await _barge_in(_ws(url) + "/tts/websocket", {"X-API-Key": "bench"}, opening, interrupt, read)


async def barge_deepgram(url: str) -> Barge:
    opening = [json.dumps({"type": "Speak", "text": FOUR_SENTENCES}), json.dumps({"type": "Flush"})]
    return await _barge_in(
        _ws(url) + "/v1/speak?model=af_heart&encoding=linear16&sample_rate=24000",
        {"Authorization": "Token bench"},
        opening,
        [json.dumps({"type": "Clear"})],
        _binary_or("Cleared"),
    )


async def barge_deepgram_flux(url: str) -> Barge:
    opening = [json.dumps({"type": "Speak", "text": FOUR_SENTENCES}), json.dumps({"type": "Flush"})]
    offset = {"type": "time_ms", "value": int(PLAYED_BEFORE_S * 1000)}
    return await _barge_in(
        _ws(url) + "/v2/speak?model=af_heart&encoding=linear16&sample_rate=24000",
        {"Authorization": "Token bench"},
        opening,
        [json.dumps({"type": "Interrupt", "playback_offset": offset})],
        _binary_or("SpeechInterrupted"),
    )


BARGE_INS: list[tuple[str, Callable[[str], Awaitable[Barge]]]] = [
    ("session: cancel (played_ms)", barge_session),
    ("ElevenLabs: close the context, open the next", barge_elevenlabs),
    ("Cartesia: cancel", barge_cartesia),
    ("Deepgram /v1/speak: Clear", barge_deepgram),
    ("Deepgram /v2/speak: Interrupt (playback_offset)", barge_deepgram_flux),
]


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


async def run(trials: int, rate: float) -> list[dict[str, Any]]:
    engine = KokoroEngine.load()
    prepare(engine)
    port, wyoming_port = free_port(), free_port()
    config = ServerConfig(port=port, wyoming_uri=f"tcp://127.0.0.1:{wyoming_port}")
    server = build_server(config, engine, log_level="warning")
    task = asyncio.create_task(server.server.serve())
    url = f"http://127.0.0.1:{port}"
    while not server.server.started:
        await asyncio.sleep(0.05)
    rows = []
    try:
        for group, name, fn in SURFACES:
            await fn(url, wyoming_port, rate)  # warm the path (connections, imports)
            first, heard, audio, text_done = [], [], [], []
            for _ in range(trials):
                started, arrivals, pcm, finished = await fn(url, wyoming_port, rate)
                first.append((arrivals[0][0] - started) * 1000)
                onset = heard_onset_s(started, arrivals, pcm)
                heard.append((onset or float("nan")) * 1000)
                audio.append(len(pcm) / 2 / 24_000)
                if finished is not None:
                    text_done.append((finished - started) * 1000)
            rows.append(
                {
                    "group": group,
                    "surface": name,
                    "first_byte_ms": stats(first)["p50"],
                    "heard_ms": stats(heard)["p50"],
                    "heard_p95_ms": stats(heard)["p95"],
                    "text_done_ms": stats(text_done)["p50"] if text_done else None,
                    "audio_s": stats(audio)["p50"],
                    "trials": trials,
                }
            )
            print(f"  {name}: heard {rows[-1]['heard_ms']:.0f} ms", flush=True)
        for name, barge in BARGE_INS:
            await barge(url)  # warm
            stops, tails, acks = [], [], []
            for _ in range(trials):
                stop_ms, tail_ms, ack_ms = await barge(url)
                stops.append(stop_ms)
                tails.append(tail_ms)
                if ack_ms is not None:
                    acks.append(ack_ms)
            rows.append(
                {
                    "group": "barge-in",
                    "surface": name,
                    "last_audio_ms": stats(stops)["p50"],
                    "last_audio_p95_ms": stats(stops)["p95"],
                    "audio_after_ms": stats(tails)["p50"],
                    "acknowledged_ms": stats(acks)["p50"] if acks else None,
                    "trials": trials,
                }
            )
            print(f"  {name}: last audio {rows[-1]['last_audio_ms']:.0f} ms after the interrupt", flush=True)
    finally:
        server.server.should_exit = True
        await task
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--tokens-per-s", type=float, default=20.0, help="pace of the streamed-text surfaces")
    args = parser.parse_args(argv)
    rows = asyncio.run(run(args.trials, args.tokens_per_s))
    speech = [r for r in rows if r["group"] != "barge-in"]
    barge = [r for r in rows if r["group"] == "barge-in"]
    print(
        table(
            speech,
            [
                ("group", "input"),
                ("surface", "surface"),
                ("first_byte_ms", "first byte ms"),
                ("heard_ms", "heard ms (p50)"),
                ("heard_p95_ms", "p95"),
                ("text_done_ms", "last word sent ms"),
                ("audio_s", "audio s"),
            ],
        )
    )
    print(
        table(
            barge,
            [
                ("surface", "barge-in"),
                ("last_audio_ms", "interrupt to last audio byte ms (p50)"),
                ("last_audio_p95_ms", "p95"),
                ("audio_after_ms", "audio after it ms"),
                ("acknowledged_ms", "acknowledged ms"),
            ],
        )
    )
    payload = {"trials": args.trials, "tokens_per_s": args.tokens_per_s, "text": FOUR_SENTENCES, "rows": rows}
    print("wrote", write_result("integrations", payload))
    return payload


def report(d: dict[str, Any]) -> str:
    rows = [
        [
            r["group"],
            r["surface"],
            md_value(r["first_byte_ms"], 0),
            md_value(r["heard_ms"], 0),
            md_value(r["heard_p95_ms"], 0),
            "-" if r["text_done_ms"] is None else md_value(r["text_done_ms"], 0),
            md_value(r["audio_s"], 1),
        ]
        for r in d["rows"]
        if r["group"] != "barge-in"
    ]
    barge = [
        [r["surface"], md_value(r["last_audio_ms"], 0), md_value(r["last_audio_p95_ms"], 0),
         md_value(r["audio_after_ms"], 0),
         "-" if r.get("acknowledged_ms") is None else md_value(r["acknowledged_ms"], 0)]
        for r in d["rows"]
        if r["group"] == "barge-in"
    ]  # fmt: skip
    return (
        f"The four-sentence reply through every surface of one server (Wyoming in the same process), PCM "
        f"24 kHz, {d['trials']} trials each (p50 unless marked). Whole text: timed from the request. Streamed "
        f"text: the reply written word by word at {d['tokens_per_s']:g} words/s, timed from the first word; "
        "speech heard before the last word is sent is the point.\n\n"
        + md_table(
            ["input", "surface", "first byte ms", "heard ms", "heard p95 ms", "last word sent ms", "audio s"],
            rows,
        )
        + (
            f"\n\nBarge-in: the reply playing ({PLAYED_BEFORE_S:g} s of its audio received), the client stops it "
            "the wire's own way; from the interrupt sent to the last audio byte of the stopped answer, and how "
            "much audio came after the interrupt.\n\n"
            + md_table(
                ["wire", "interrupt to last audio ms", "p95 ms", "audio after it ms", "acknowledged ms"],
                barge,
            )
            if barge
            else ""
        )
    )


if __name__ == "__main__":
    main()
