"""Streamed text on the session protocol: a synthesize with ``"stream": true`` fed by ``append`` as an LLM
writes, ``flush`` and ``end``; one started, its alignment, its audio and one complete, against the real
server; the server chunks it (fast first piece, the quiet cut); cancel by id mid-stream; bounds."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import numpy as np
from websockets.asyncio.client import connect

from streamvoice.bench.wer import word_error_rate
from streamvoice.engine import KokoroEngine
from tests.helpers import RunningServer, start_speech_server, wait_for
from tests.helpers import answers as next_answers

REPLY = "Sure, I can help with that. Your order shipped this morning and arrives on Friday."


async def _read_answer(ws: Any, msg_id: str, log: list[tuple[float, dict[str, Any] | int]]) -> bytes:
    """Frames of message ``msg_id`` until its answer; control frames and audio sizes logged with times."""
    pcm = b""
    async with asyncio.timeout(60):
        while True:
            frame = await ws.recv()
            if isinstance(frame, bytes):
                pcm += frame
                log.append((time.monotonic(), len(frame)))
                continue
            event = json.loads(frame)
            log.append((time.monotonic(), event))
            if event.get("id") == msg_id and event["type"] in ("synthesis_complete", "error"):
                return pcm


async def test_tokens_streamed_in_are_spoken_before_the_text_ends(
    speech_server: RunningServer, transcriber: Any
) -> None:
    log: list[tuple[float, dict[str, Any] | int]] = []
    async with connect(speech_server.ws_url) as ws:
        await ws.send(json.dumps({"type": "synthesize", "stream": True, "id": "r1"}))
        reader = asyncio.create_task(_read_answer(ws, "r1", log))
        for token in REPLY.replace(" ", " \0").split("\0"):  # word by word, at an LLM's pace
            await ws.send(json.dumps({"type": "append", "id": "r1", "text": token}))
            await asyncio.sleep(0.05)
        # speech begins while the text is still open: its first audio comes before any ``end``
        await wait_for(lambda: any(isinstance(e, int) for _, e in log))
        await ws.send(json.dumps({"type": "end", "id": "r1"}))
        pcm = await reader
    events = [e for _, e in log if isinstance(e, dict)]
    kinds = [e["type"] for e in events]
    assert kinds.count("synthesis_started") == 1 and kinds.count("synthesis_complete") == 1
    assert "error" not in kinds and kinds[-1] == "synthesis_complete"
    words = [w["word"] for e in events if e["type"] == "alignment" for w in e["words"]]
    assert " ".join(words) == REPLY  # the caller's words, in order
    heard = transcriber.transcribe(
        np.frombuffer(pcm, dtype=np.int16).astype(np.float32) / 32768, language="en"
    )
    assert word_error_rate(REPLY, heard) < 0.15, heard


async def test_flush_speaks_what_is_buffered_and_the_quiet_cut_speaks_a_finished_sentence(
    speech_server: RunningServer,
) -> None:
    log: list[tuple[float, dict[str, Any] | int]] = []
    async with connect(speech_server.ws_url) as ws:
        await ws.send(json.dumps({"type": "synthesize", "stream": True, "id": "q", "text": "Good evening."}))
        reader = asyncio.create_task(_read_answer(ws, "q", log))
        # Waited for as events, within the server's 30 s text timeout (``stream_text_timeout_s``), which would
        # speak and end the stream anyway: 1.5 s sleeps failed on a loaded CI machine.
        await wait_for(lambda: any(isinstance(e, int) for _, e in log), timeout=20)  # the quiet cut spoke it

        def words() -> list[str]:
            return [
                w["word"]
                for _, e in log
                if isinstance(e, dict) and e["type"] == "alignment"
                for w in e["words"]
            ]

        await ws.send(json.dumps({"type": "append", "id": "q", "text": "The total is forty"}))
        await ws.send(json.dumps({"type": "flush", "id": "q"}))  # no sentence end: spoken because asked
        await wait_for(lambda: "forty" in words(), timeout=20)
        assert words() == ["Good", "evening.", "The", "total", "is", "forty"]
        await ws.send(json.dumps({"type": "end"}))  # no id: the latest open stream
        await reader
    assert [e["type"] for _, e in log if isinstance(e, dict)][-1] == "synthesis_complete"


async def test_a_stream_is_cancelled_by_id_and_the_next_message_speaks(speech_server: RunningServer) -> None:
    log: list[tuple[float, dict[str, Any] | int]] = []
    async with connect(speech_server.ws_url) as ws:
        await ws.send(json.dumps({"type": "synthesize", "stream": True, "id": "s", "text": REPLY}))
        reader = asyncio.create_task(_read_answer(ws, "s", log))
        while not any(isinstance(e, int) for _, e in log):
            await asyncio.sleep(0.02)
        await ws.send(json.dumps({"type": "cancel", "id": "s"}))
        await reader
        answer = [e for _, e in log if isinstance(e, dict) and e.get("id") == "s"][-1]
        assert answer["type"] == "error" and answer["code"] == "cancelled"
        await ws.send(json.dumps({"type": "append", "id": "s", "text": "too late"}))
        late = json.loads(await asyncio.wait_for(ws.recv(), 10))
        while late["type"] != "error":
            late = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert late["code"] == "invalid_message" and late["id"] == "s" and late.get("sequence") is None
        await ws.send(json.dumps({"type": "synthesize", "text": "Next.", "id": "n"}))
        rest: list[tuple[float, dict[str, Any] | int]] = []
        await _read_answer(ws, "n", rest)
        assert [e for _, e in rest if isinstance(e, dict)][-1]["type"] == "synthesis_complete"


async def test_close_speaks_the_open_streams_as_they_stand_and_closes(scripted: KokoroEngine) -> None:
    """``close``: no more text can come, so an open stream is ended now, not after its text timeout (set to
    ten minutes here: before the fix the answer came only then)."""
    server = await asyncio.to_thread(start_speech_server, scripted, stream_text_timeout_s=600.0)
    try:
        async with connect(server.ws_url) as ws:
            await ws.send(
                json.dumps({"type": "synthesize", "stream": True, "id": "a", "text": "Hello there."})
            )
            await ws.send(json.dumps({"type": "synthesize", "stream": True, "id": "b", "text": "And you"}))
            await ws.send(json.dumps({"type": "close"}))
            events = []
            async with asyncio.timeout(120):
                async for frame in ws:  # until the server closes the socket
                    if isinstance(frame, str):
                        events.append(json.loads(frame))
        assert ws.close_code == 1000
        answers = [(e["type"], e.get("id")) for e in events if e["type"] != "alignment"]
        assert answers == [
            ("synthesis_started", "a"),
            ("synthesis_complete", "a"),
            ("synthesis_started", "b"),
            ("synthesis_complete", "b"),
            ("session_closed", None),
        ]
    finally:
        await asyncio.to_thread(server.stop)


async def test_a_stream_is_bounded_in_text_and_in_time(engine: KokoroEngine) -> None:
    server = await asyncio.to_thread(
        start_speech_server, engine, warm_up=False, max_stream_chars=200, stream_text_timeout_s=1.0
    )
    try:
        async with connect(server.ws_url) as ws:
            # Past the cap: that append is refused, what came is spoken, the message completes.
            await ws.send(
                json.dumps({"type": "synthesize", "stream": True, "id": "big", "text": "Hello there. "})
            )
            await ws.send(json.dumps({"type": "append", "id": "big", "text": "word " * 60}))
            log: list[tuple[float, dict[str, Any] | int]] = []
            await _read_answer(ws, "big", log)
            events = [e for _, e in log if isinstance(e, dict)]
            assert events[-1]["type"] == "synthesis_complete" and "error" not in [e["type"] for e in events]
            refused = json.loads(await asyncio.wait_for(ws.recv(), 60))  # in order: after the answer
            assert (
                refused["type"] == "error" and refused["code"] == "text_too_long" and refused["id"] == "big"
            )
            assert refused.get("sequence") is None
            # A stream never ended: spoken as it stood and completed once no text came for 1 s.
            await ws.send(
                json.dumps({"type": "synthesize", "stream": True, "id": "open", "text": "Still here"})
            )
            log = []
            await _read_answer(ws, "open", log)
            assert [e for _, e in log if isinstance(e, dict)][-1]["type"] == "synthesis_complete"
            # An opening text past the stream's cap is that message's one answer (it was empty_text).
            opening = {"type": "synthesize", "stream": True, "id": "long", "text": "word " * 50}
            await ws.send(json.dumps(opening))
            (answer,) = await next_answers(ws, 1)
            assert answer["code"] == "text_too_long" and answer["id"] == "long" and "sequence" in answer
    finally:
        await asyncio.to_thread(server.stop)
