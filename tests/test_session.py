"""The bidirectional session over a real WebSocket: order, frame kinds, cancel, close, bad input."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from websockets.asyncio.client import connect

from streamvoice.client import ControlEvent, SpeechClient, SpeechError
from streamvoice.engine import KokoroEngine
from tests.helpers import (
    RunningServer,
    collect,
    metric,
    start_speech_server,
    wait_for,
)
from tests.helpers import answers as next_answers


async def test_text_and_binary_frames_many_messages_in_order(scripted_server: RunningServer) -> None:
    async with connect(scripted_server.ws_url) as ws:
        await ws.send(json.dumps({"type": "synthesize", "text": "One.", "id": "a"}))
        await ws.send(json.dumps({"text": "Two, sent as binary like SageMaker does.", "id": "b"}).encode())
        await ws.send(json.dumps({"type": "synthesize", "text": "Three.", "id": "c", "format": "mp3"}))
        controls, audio = await collect(ws, 3)
    completes = [c for c in controls if c["type"] == "synthesis_complete"]
    assert [c["id"] for c in completes] == ["a", "b", "c"]
    assert [c["sequence"] for c in completes] == [0, 1, 2]
    for c in completes:
        assert c["bytes"] == audio[c["id"]] > 0 and c["audio_ms"] > 300
    assert completes[0]["bytes"] == completes[0]["audio_ms"] * 48  # s16le at 24 kHz


async def test_every_bad_input_gets_an_error_and_the_session_goes_on(scripted_server: RunningServer) -> None:
    bad_frames: list[str | bytes] = [
        "not json at all",
        "[1, 2, 3]",
        b"\xff\xfe\xfd",
        '{"type": "synthesize", "id": "m"}',
        '{"type": "synthesize", "text": "", "id": "e"}',
        '{"type": "synthesize", "text": "Hi.", "voice": "af_nobody", "id": "v"}',
        '{"type": "synthesize", "text": "Hi.", "speed": 5, "id": "s"}',
        json.dumps({"type": "synthesize", "text": "word " * 500, "id": "long"}),
        "x" * 20_000,
        '{"type": "warp"}',
        '{"type": "configure", "voice": "zz_bad"}',
    ]
    expected = [
        "invalid_json",
        "invalid_message",
        "invalid_utf8",
        "missing_text",
        "empty_text",
        "unknown_voice",
        "invalid_speed",
        "text_too_long",
        "message_too_large",
        "unknown_type",
        "unknown_voice",
    ]
    async with connect(scripted_server.ws_url) as ws:
        for frame in bad_frames:
            await ws.send(frame)
        await ws.send(json.dumps({"type": "synthesize", "text": "Still working.", "id": "ok"}))
        controls, audio = await collect(ws, len(bad_frames) + 1)
    errors = [c for c in controls if c["type"] == "error"]
    assert [e["code"] for e in errors] == expected
    for e in errors:
        assert len(e["message"]) > 15 and e["message"] not in ("text", "'text'")
    assert controls[-1]["type"] == "synthesis_complete" and controls[-1]["id"] == "ok"
    assert audio["ok"] > 0
    unknown = next(e for e in errors if e["code"] == "unknown_voice")
    assert "Did you mean" in unknown["message"]


async def test_configure_sets_session_defaults(scripted_server: RunningServer) -> None:
    async with connect(scripted_server.ws_url) as ws:
        await ws.send(json.dumps({"type": "configure", "format": "wav", "speed": 1.3, "voice": "bm_george"}))
        await ws.send(json.dumps({"type": "synthesize", "text": "Configured.", "id": "w"}))
        controls, _ = await collect(ws, 1)
    assert controls[0]["type"] == "configured" and controls[0]["voice"] == "bm_george"
    started = next(c for c in controls if c["type"] == "synthesis_started")
    assert started["format"] == "wav"


async def test_cancel_drops_queued_and_in_progress_work(scripted_server: RunningServer) -> None:
    long_text = "This is a long message that would take many seconds to say out loud. " * 6
    async with connect(scripted_server.ws_url) as ws:
        for i in range(3):
            await ws.send(json.dumps({"type": "synthesize", "text": long_text, "id": f"l{i}"}))
        await asyncio.sleep(0.2)
        await ws.send(json.dumps({"type": "cancel"}))
        await ws.send(json.dumps({"type": "synthesize", "text": "After the cancel.", "id": "after"}))
        controls, audio = await collect(ws, 4, timeout=60)
    answers = {c["id"]: c for c in controls if c["type"] in ("synthesis_complete", "error")}
    assert {answers[f"l{i}"]["code"] for i in range(3)} == {"cancelled"}
    assert answers["after"]["type"] == "synthesis_complete"
    ack = next(c for c in controls if c["type"] == "cancelled")
    assert ack["count"] == 3
    assert audio["after"] > 0


async def test_cancel_with_an_id_cancels_that_message_only(scripted_server: RunningServer) -> None:
    async with connect(scripted_server.ws_url) as ws:
        await ws.send(json.dumps({"text": "The first message is spoken in full. " * 3, "id": "a"}))
        await ws.send(json.dumps({"text": "The second one is interrupted before it starts.", "id": "b"}))
        await ws.send(json.dumps({"text": "The third one is spoken too.", "id": "c"}))
        await ws.send(json.dumps({"type": "cancel", "id": "b"}))
        await ws.send(json.dumps({"type": "cancel", "id": "nobody"}))
        controls, audio = await collect(ws, 3, timeout=90)
        acks = [json.loads(await asyncio.wait_for(ws.recv(), 10)) for _ in range(2)]  # in arrival order
    answers = {c["id"]: c for c in controls if c["type"] in ("synthesis_complete", "error")}
    assert answers["a"]["type"] == "synthesis_complete" and audio["a"] > 0
    assert answers["b"]["code"] == "cancelled" and "b" not in audio
    assert answers["c"]["type"] == "synthesis_complete" and audio["c"] > 0
    assert [(a["type"], a["ids"]) for a in acks] == [("cancelled", ["b"]), ("cancelled", [])]


async def test_close_finishes_queued_work_then_ends(scripted_server: RunningServer) -> None:
    client = await SpeechClient.connect(scripted_server.ws_url)
    await client.synthesize("Finish me before closing.", id="x")
    await client.close()
    events = [e async for e in client.events()]
    types = [e.type for e in events if isinstance(e, ControlEvent)]
    assert types[-2:] == ["synthesis_complete", "session_closed"]
    await client.aclose()


async def test_client_speak_and_errors(scripted_server: RunningServer) -> None:
    async with await SpeechClient.connect(scripted_server.url) as client:
        result = await client.speak("Client library test.", format="pcm")
        assert len(result.audio) == result.complete["bytes"] > 0
        assert result.time_to_first_audio_s is not None and result.time_to_first_audio_s > 0
        with pytest.raises(SpeechError) as info:
            await client.speak("x", voice="nope_voice")
        assert info.value.code == "unknown_voice"
        again = await client.speak("Still usable.", binary=True)
        assert again.audio


async def test_idle_timeout_closes_with_reason(scripted: KokoroEngine) -> None:
    from tests.helpers import start_speech_server

    server = await asyncio.to_thread(start_speech_server, scripted, idle_timeout_s=0.5, warm_up=False)
    try:
        async with connect(server.ws_url) as ws:
            frame = await asyncio.wait_for(ws.recv(), 5)
            assert json.loads(frame)["code"] == "idle_timeout"
    finally:
        await asyncio.to_thread(server.stop)


HUGE = "9" * 400


# --- 1. huge JSON integers ----------------------------------------------------------------------------


async def test_huge_integers_are_answered_and_leak_no_session(scripted_server: RunningServer) -> None:
    before = metric(scripted_server, "streamvoice_active_sessions")
    frames = [
        f'{{"type": "synthesize", "text": "Hi.", "speed": {HUGE}, "id": "s"}}',
        f'{{"type": "synthesize", "text": "Hi.", "speed": -{HUGE}}}',
        '{"type": "synthesize", "text": "Hi.", "id": ' + "7" * 5000 + "}",
        f'{{"type": "configure", "speed": {HUGE}}}',
    ]
    async with connect(scripted_server.ws_url) as ws:
        for frame in frames:
            await ws.send(frame)
        errors = [json.loads(await asyncio.wait_for(ws.recv(), 10)) for _ in frames]
        assert [e["code"] for e in errors] == [
            "invalid_speed",
            "invalid_speed",
            "invalid_json",
            "invalid_speed",
        ]
        await ws.send(json.dumps({"text": "Still here.", "id": "ok"}))
        answers = await next_answers(ws, 1)
        assert answers[-1]["type"] == "synthesis_complete" and answers[-1]["id"] == "ok"
    await wait_for(lambda: metric(scripted_server, "streamvoice_active_sessions") == before)
    r = httpx.post(scripted_server.url + "/invocations", content=f'{{"text": "Hi.", "speed": {HUGE}}}')
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_speed"


# --- 5. pipelining past the queue ------------------------------------------------------------------------


async def test_pipelining_past_the_queue_gets_queue_full_and_keeps_the_session(
    busy_scripted: KokoroEngine,
) -> None:
    server = await asyncio.to_thread(
        start_speech_server, busy_scripted, warm_up=False, max_queued_messages=3, ws_ping_interval_s=1.0,
        ws_ping_timeout_s=2.0,
    )  # fmt: skip
    try:
        async with connect(server.ws_url, ping_interval=None) as ws:
            long = "This sentence keeps the model busy while the others arrive and must queue."  # seconds of work
            await ws.send(json.dumps({"text": long, "id": "m0"}))
            for i in range(1, 9):
                await ws.send(json.dumps({"text": f"Message number {i}.", "id": f"m{i}"}))
            answers = await next_answers(ws, 9, timeout=120)
            await asyncio.sleep(3)  # longer than the ping timeout: pongs were read all along
            await ws.send(json.dumps({"text": "Alive.", "id": "alive"}))
            answers += await next_answers(ws, 1)
        by_id = {a["id"]: a for a in answers}
        assert len(by_id) == 10  # every message answered exactly once
        assert [by_id[f"m{i}"]["type"] for i in range(3)] == ["synthesis_complete"] * 3
        assert {by_id[f"m{i}"].get("code") for i in range(3, 9)} == {"queue_full"}
        assert by_id["alive"]["type"] == "synthesis_complete"
    finally:
        await asyncio.to_thread(server.stop)


# --- 8 and 9. sizes -----------------------------------------------------------------------------------------


async def test_oversized_frame_is_answered_and_the_session_goes_on(scripted: KokoroEngine) -> None:
    server = await asyncio.to_thread(start_speech_server, scripted, warm_up=False, max_message_bytes=8192)
    try:
        async with connect(server.ws_url, max_size=None) as ws:
            await ws.send(json.dumps({"text": "Queued first.", "id": "a"}))
            await ws.send(json.dumps({"text": "x " * 10_000, "id": "big"}))
            await ws.send(json.dumps({"text": "Queued after.", "id": "b"}))
            answers = await next_answers(ws, 3)
        assert [a.get("code") for a in answers] == [None, "message_too_large", None]
    finally:
        await asyncio.to_thread(server.stop)


async def test_session_lifetime_ends_an_idle_session_on_time(scripted: KokoroEngine) -> None:
    server = await asyncio.to_thread(start_speech_server, scripted, warm_up=False, session_lifetime_s=2.0)
    try:
        async with connect(server.ws_url) as ws:  # no frame sent: the lifetime ends it, not the idle timeout
            event = json.loads(await asyncio.wait_for(ws.recv(), 60))
            assert event["code"] == "session_expired"
    finally:
        await asyncio.to_thread(server.stop)
