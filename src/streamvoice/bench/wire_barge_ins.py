"""Section 8's barge-ins, one per socket wire: the reply is playing when the client stops it the wire's own
way; from the interrupt to the last audio byte of the stopped answer (``bench.integrations`` runs them)."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Awaitable, Callable

from streamvoice.bench.common import FOUR_SENTENCES
from streamvoice.bench.wire_trials import Stopped, binary_or, ws_url

PLAYED_BEFORE_S = 1.5  # of the reply's audio received when the client interrupts
QUIET_S = 1.0  # no frame for this long after the interrupt: the stopped answer has sent all it will

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


async def barge_session(url: str) -> Barge:
    opening = [json.dumps({"type": "synthesize", "id": "r", "text": FOUR_SENTENCES, "format": "pcm"})]
    interrupt = [json.dumps({"type": "cancel", "played_ms": PLAYED_BEFORE_S * 1000})]
    return await _barge_in(
        ws_url(url) + "/invocations-bidirectional-stream", {}, opening, interrupt, binary_or("cancelled")
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
    return await _barge_in(ws_url(url) + path, {"xi-api-key": "bench"}, opening, interrupt, read)


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
    return await _barge_in(ws_url(url) + "/tts/websocket", {"X-API-Key": "bench"}, opening, interrupt, read)


async def barge_deepgram(url: str) -> Barge:
    opening = [json.dumps({"type": "Speak", "text": FOUR_SENTENCES}), json.dumps({"type": "Flush"})]
    return await _barge_in(
        ws_url(url) + "/v1/speak?model=af_heart&encoding=linear16&sample_rate=24000",
        {"Authorization": "Token bench"},
        opening,
        [json.dumps({"type": "Clear"})],
        binary_or("Cleared"),
    )


async def barge_deepgram_flux(url: str) -> Barge:
    opening = [json.dumps({"type": "Speak", "text": FOUR_SENTENCES}), json.dumps({"type": "Flush"})]
    offset = {"type": "time_ms", "value": int(PLAYED_BEFORE_S * 1000)}
    return await _barge_in(
        ws_url(url) + "/v2/speak?model=af_heart&encoding=linear16&sample_rate=24000",
        {"Authorization": "Token bench"},
        opening,
        [json.dumps({"type": "Interrupt", "playback_offset": offset})],
        binary_or("SpeechInterrupted"),
    )


BARGE_INS: list[tuple[str, Callable[[str], Awaitable[Barge]]]] = [
    ("session: cancel (played_ms)", barge_session),
    ("ElevenLabs: close the context, open the next", barge_elevenlabs),
    ("Cartesia: cancel", barge_cartesia),
    ("Deepgram /v1/speak: Clear", barge_deepgram),
    ("Deepgram /v2/speak: Interrupt (playback_offset)", barge_deepgram_flux),
]
