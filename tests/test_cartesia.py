"""`server.cartesia`: the official `cartesia` SDK, unmodified, its base URL pointed at the real speech server;
the key it sends carries the server's token."""

from __future__ import annotations

import pytest
from cartesia import Cartesia

from streamvoice.bench.wer import word_error_rate
from tests.helpers import TRAIN_SENTENCE as TEXT
from tests.helpers import VENDOR_TOKEN as TOKEN
from tests.helpers import RunningServer, pcm16

# --- Cartesia -------------------------------------------------------------------------------------------


def cartesia_client(server: RunningServer) -> Cartesia:
    return Cartesia(
        api_key=TOKEN, base_url=server.url, websocket_base_url=server.url.replace("http", "ws", 1)
    )


RAW = {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000}


@pytest.mark.slow
def test_cartesia_sdk_bytes_and_websocket_contexts(vendor_server: RunningServer, transcriber) -> None:  # type: ignore[no-untyped-def]
    client = cartesia_client(vendor_server)
    response = client.tts.generate(
        model_id="sonic-2", transcript=TEXT, voice={"mode": "id", "id": "af_heart"}, output_format=RAW
    )
    assert word_error_rate(TEXT, transcriber.transcribe(pcm16(response.read()))) < 0.2

    with client.tts.websocket_connect() as connection:
        ctx = connection.context(
            model_id="sonic-2", voice={"mode": "id", "id": "af_bella"}, output_format=RAW, add_timestamps=True
        )
        words = TEXT.split(" ")
        for i, word in enumerate(words):  # an LLM's tokens, spaces the caller's
            ctx.push(word + (" " if i < len(words) - 1 else ""))
        ctx.no_more_inputs()
        audio, stamps, kinds = bytearray(), [], []
        for event in ctx.receive():
            kinds.append(event.type)
            if event.type == "chunk" and event.audio:
                audio += event.audio
            elif event.type == "timestamps" and event.word_timestamps:
                stamps += list(zip(event.word_timestamps.words, event.word_timestamps.start, strict=True))
    assert kinds[-1] == "done"
    pcm = pcm16(bytes(audio))
    assert word_error_rate(TEXT, transcriber.transcribe(pcm)) < 0.2
    assert [w for w, _ in stamps] == words
    whisper = transcriber.words(pcm)
    for (_, ours_s), (_, whisper_ms, _) in zip(stamps[:6], whisper[:6], strict=False):
        assert abs(ours_s * 1000 - whisper_ms) < 350, (stamps[:6], whisper[:6])


def test_cartesia_sdk_voices_and_errors(vendor_server: RunningServer) -> None:
    client = cartesia_client(vendor_server)
    ids = {v.id for v in client.voices.list()}
    assert "af_heart" in ids
    with client.tts.websocket_connect() as connection:
        ctx = connection.context(model_id="sonic-2", voice={"mode": "id", "id": "af_heart"})
        ctx.send(
            transcript="Hello.",
            voice={"mode": "id", "id": "af_heart"},
            output_format={**RAW, "sample_rate": 11025},
            continue_=False,
        )
        events = list(ctx.receive())
    assert events[-1].type == "error" and "sample_rate" in (events[-1].message or "")


def test_sse_step_time_is_each_chunks_duration_in_every_encoding(vendor_server: RunningServer) -> None:
    """``step_time`` counts samples at the rate asked, not bytes at the model's (it said double for
    pcm_s16le and four times for pcm_f32le)."""
    import base64
    import json

    import httpx

    for encoding, width in (("pcm_s16le", 2), ("pcm_f32le", 4), ("pcm_mulaw", 1)):
        output_format = {"container": "raw", "encoding": encoding, "sample_rate": 16000}
        body = {"model_id": "sonic-2", "transcript": "One short line.", "voice": {"mode": "id", "id": "af_heart"},
                "output_format": output_format}  # fmt: skip
        r = httpx.post(vendor_server.url + "/tts/sse", json=body, headers={"X-API-Key": TOKEN}, timeout=60)
        chunks = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]
        chunks = [c for c in chunks if c["type"] == "chunk"]
        for chunk in chunks:
            samples = len(base64.b64decode(chunk["data"])) / width
            assert chunk["step_time"] == round(samples * 1000 / 16000, 1), (encoding, chunk["step_time"])
        assert len(chunks) >= 1


def test_a_mistyped_encoding_or_rate_is_a_clear_400(vendor_server: RunningServer) -> None:
    import httpx

    for output_format in (
        {"container": "raw", "encoding": {"x": 1}, "sample_rate": 24000},  # was a 500 (unhashable)
        {"container": "raw", "encoding": "pcm_s16le", "sample_rate": [24000]},
    ):
        body = {"model_id": "sonic-2", "transcript": "Hi.", "voice": {"mode": "id", "id": "af_heart"},
                "output_format": output_format}  # fmt: skip
        r = httpx.post(vendor_server.url + "/tts/bytes", json=body, headers={"X-API-Key": TOKEN}, timeout=60)
        assert r.status_code == 400 and "output_format" in r.text, (output_format, r.status_code, r.text)
    r = httpx.get(vendor_server.url + "/voices/?limit=²", headers={"X-API-Key": TOKEN}, timeout=60)
    assert r.status_code == 200  # a Unicode digit is not a number: the default page size


async def test_text_for_a_cancelled_context_is_told_it_was_cancelled(vendor_server: RunningServer) -> None:
    import asyncio
    import json

    import websockets

    url = vendor_server.url.replace("http", "ws", 1) + "/tts/websocket"
    base = {"model_id": "sonic-2", "voice": {"mode": "id", "id": "af_heart"}, "output_format": RAW}
    async with websockets.connect(url, additional_headers={"X-API-Key": TOKEN}) as ws:
        await ws.send(
            json.dumps({**base, "context_id": "x", "transcript": "A long answer. " * 10, "continue": True})
        )
        await ws.send(json.dumps({"context_id": "x", "cancel": True}))
        await ws.send(json.dumps({**base, "context_id": "x", "transcript": "More.", "continue": False}))
        async with asyncio.timeout(60):
            while True:
                event = json.loads(await ws.recv())
                if event.get("type") == "error" and "context" in event.get("message", ""):
                    break
    assert "was cancelled" in event["message"] and "continue was false" not in event["message"], event


async def test_a_flush_is_answered_flush_done_after_its_audio(vendor_server: RunningServer) -> None:
    """Cartesia's ``flush_done``: the audio of what came before the n-th flush carries ``flush_id`` n, then
    ``flush_done`` n; what follows carries n + 1 (clients map audio to what they sent by it)."""
    import asyncio
    import json

    import websockets

    url = vendor_server.url.replace("http", "ws", 1) + "/tts/websocket"
    base = {"model_id": "sonic-2", "voice": {"mode": "id", "id": "af_heart"}, "output_format": RAW}
    kinds: list[tuple[str, int | None]] = []
    async with websockets.connect(url, additional_headers={"X-API-Key": TOKEN}) as ws:
        first = {**base, "context_id": "f", "transcript": "Hello there.", "continue": True, "flush": True}
        await ws.send(json.dumps(first))
        async with asyncio.timeout(60):
            while not kinds or kinds[-1][0] != "flush_done":  # the flush is answered before more is sent
                event = json.loads(await ws.recv())
                kinds.append((event["type"], event.get("flush_id")))
            await ws.send(
                json.dumps({**base, "context_id": "f", "transcript": "Goodbye now.", "continue": False})
            )
            while kinds[-1][0] != "done":
                event = json.loads(await ws.recv())
                kinds.append((event["type"], event.get("flush_id")))
    done_at = kinds.index(("flush_done", 1))
    assert kinds[:done_at] and all(k == ("chunk", 1) for k in kinds[:done_at]), kinds
    after = kinds[done_at + 1 : -1]
    assert after and all(k == ("chunk", 2) for k in after), kinds
