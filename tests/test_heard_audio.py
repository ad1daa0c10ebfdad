"""What was heard, on the real server: a client plays a known amount of a long answer and cuts it off; the
``heard`` the server answers is what an independent listener places there: Whisper's word times of the same
answer, the words it hears at least half before the cut (at most one word apart). The session protocol here;
Deepgram's ``/v2/speak`` in ``tests/test_deepgram_flux.py``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from websockets.asyncio.client import connect

from streamvoice.bench.wer import words as wer_words
from streamvoice.protocol import WS_PATH
from tests.helpers import RunningServer, pcm16

RATE = 24_000
ENGLISH = (
    "The little boat drifted slowly across the quiet lake. A heron stood watching from the reeds, "
    "perfectly still. Far away, somebody was ringing a bell for supper, and the children ran home."
)
SPANISH = (
    "El pequeño barco cruzaba despacio el lago tranquilo. Una garza miraba desde los juncos, sin "
    "moverse. A lo lejos, alguien tocaba una campana para la cena, y los niños corrieron a casa."
)


async def play_then_cut(
    server: RunningServer,
    message: dict[str, Any],
    played_ms: float | None,
    then: dict[str, Any] | None = None,
) -> tuple[bytes, dict[str, Any], list[dict[str, Any]]]:
    """Send ``message``, take its audio until ``played_ms`` of it has come (what a player played), cancel
    (with ``played_ms``, or without: the server's playout clock), and read to the ``cancelled`` answer."""
    url = server.url.replace("http", "ws", 1) + WS_PATH
    audio = bytearray()
    events: list[dict[str, Any]] = []
    async with connect(url, max_size=None) as ws, asyncio.timeout(120):
        await ws.send(json.dumps(message))
        if then is not None:
            await ws.send(json.dumps(then))
        want = int((played_ms or 3000) * RATE / 1000) * 2
        while len(audio) < want:
            frame = await ws.recv()
            if isinstance(frame, bytes):
                audio += frame
            else:
                events.append(json.loads(frame))
        cancel: dict[str, Any] = {"type": "cancel"}
        if played_ms is not None:
            cancel["played_ms"] = played_ms
        await ws.send(json.dumps(cancel))
        while True:
            frame = await ws.recv()
            if isinstance(frame, bytes):
                continue
            event = json.loads(frame)
            events.append(event)
            if event["type"] == "cancelled":
                return bytes(audio[:want]), event, events


async def _until(ws: Any, kind: str) -> dict[str, Any]:
    """The next control event of this type (the error events of a cancelled message skipped)."""
    while True:
        frame = await ws.recv()
        event = json.loads(frame) if isinstance(frame, str) else {}
        if event.get("type") == kind and (kind != "error" or event.get("code") != "cancelled"):
            return dict(event)


def _distance(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def whisper_count(text: str, whisper: str) -> int:
    """How many of the text's words Whisper heard: the prefix of the text closest to what it wrote, letter by
    letter (Whisper base mishears single words, "despacio" as "de espacio", but not where speech stops)."""
    words, heard = wer_words(text), "".join(wer_words(whisper))
    return min(range(len(words) + 1), key=lambda k: _distance("".join(words[:k]), heard))


async def whole_answer(server: RunningServer, message: dict[str, Any]) -> bytes:
    url = server.url.replace("http", "ws", 1) + WS_PATH
    audio = bytearray()
    async with connect(url, max_size=None) as ws, asyncio.timeout(120):
        await ws.send(json.dumps(message))
        while True:
            frame = await ws.recv()
            if isinstance(frame, bytes):
                audio += frame
            elif json.loads(frame)["type"] == "synthesis_complete":
                return bytes(audio)


# Whisper times the whole answer, not the played part: on audio cut mid-sentence Whisper base hallucinates (it
# once repeated the first sentence after "watching...") and hears a cut word on one CPU but not another. The
# cuts fall between two words (English: "watching" ends 4215 ms, "from" starts 4265; Spanish: "miraba" ends
# 4295, "desde" starts 4320; the messages' `alignment` events). The half-played rule itself: tests/test_heard.py.
@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "voice", "lang", "whisper_lang", "played_ms"),
    [(ENGLISH, "af_heart", None, "en", 4250.0), (SPANISH, "ef_dora", "es", "es", 4300.0)],
)
async def test_heard_is_what_whisper_hears_before_the_cut(  # type: ignore[no-untyped-def]
    speech_server: RunningServer, transcriber, text: str, voice: str, lang: str | None, whisper_lang: str,
    played_ms: float,
) -> None:  # fmt: skip
    message: dict[str, Any] = {"type": "synthesize", "id": "long", "text": text, "voice": voice}
    if lang:
        message["language"] = lang
    whole = await whole_answer(speech_server, message)
    timed = transcriber.words(pcm16(whole), RATE, language=whisper_lang)
    before = " ".join(word for word, start, end in timed if (start + end) / 2 <= played_ms)
    _, ack, _ = await play_then_cut(speech_server, message, played_ms)
    assert ack["ids"] == ["long"] and ack["played_ms"] == played_ms
    (report,) = ack["heard"]
    assert report["id"] == "long" and report["played_ms"] == played_ms
    assert report["heard"] and report["unheard"], report
    assert report["heard"] + report["unheard"] == text  # the caller's own text, cut once, exactly
    assert abs(whisper_count(text, before) - len(wer_words(report["heard"]))) <= 1, (report["heard"], before)


async def test_a_message_cut_before_its_audio_heard_nothing_and_the_next_answer_follows_on(
    speech_server: RunningServer,
) -> None:
    first = {"type": "synthesize", "id": "a", "text": ENGLISH}
    second = {"type": "synthesize", "id": "b", "text": "Nobody heard this one."}
    _, ack, _ = await play_then_cut(speech_server, first, 1500.0, then=second)
    assert ack["ids"] == ["a", "b"]
    by_id = {r["id"]: r for r in ack["heard"]}
    assert by_id["b"] == {"id": "b", "played_ms": 0.0, "heard": "", "unheard": "Nobody heard this one."}
    assert by_id["a"]["played_ms"] == 1500.0 and by_id["a"]["heard"]


async def test_without_played_ms_the_servers_playout_clock_is_used(speech_server: RunningServer) -> None:
    _, ack, _ = await play_then_cut(speech_server, {"type": "synthesize", "id": "x", "text": ENGLISH}, None)
    (report,) = ack["heard"]
    # the server sends at most a little ahead of real time: its clock is behind what was sent, never past it
    assert 0 < report["played_ms"] <= ack["played_ms"] + 0.1
    assert ENGLISH.startswith(report["heard"]) and report["unheard"]


async def test_bad_and_backward_positions_are_refused_and_cancel_nothing(
    speech_server: RunningServer,
) -> None:
    url = speech_server.url.replace("http", "ws", 1) + WS_PATH
    async with connect(url, max_size=None) as ws, asyncio.timeout(120):
        for bad in (-1, "12", True, 1e30, None):
            await ws.send(json.dumps({"type": "cancel", "played_ms": bad}))
            event = json.loads(await ws.recv())
            if bad is None:
                assert event["type"] == "cancelled" and event["heard"] == []
            else:
                assert event["type"] == "error" and event["code"] == "invalid_field", event
                assert "played_ms" in event["message"]
        await ws.send(json.dumps({"type": "synthesize", "id": "m", "text": ENGLISH}))
        audio = 0
        while audio < RATE * 2 * 2:  # two seconds of audio
            frame = await ws.recv()
            audio += len(frame) if isinstance(frame, bytes) else 0
        await ws.send(json.dumps({"type": "cancel", "played_ms": 1000}))
        event = await _until(ws, "cancelled")
        assert event["played_ms"] == 1000.0
        # the player cannot go back past the cut it reported
        await ws.send(json.dumps({"type": "cancel", "played_ms": 500}))
        event = await _until(ws, "error")
        assert event["code"] == "invalid_field" and "before 1000" in event["message"], event
        # the next answer's audio follows on from 1000 ms: a position inside it is taken
        await ws.send(json.dumps({"type": "synthesize", "id": "n", "text": "A short one. " * 8}))
        got = 0
        while got < RATE * 2:
            frame = await ws.recv()
            got += len(frame) if isinstance(frame, bytes) else 0
        await ws.send(json.dumps({"type": "cancel", "played_ms": 1500}))
        event = await _until(ws, "cancelled")
        (report,) = [r for r in event["heard"] if r["id"] == "n"]
        assert report["played_ms"] == 500.0 and report["heard"].startswith("A short")
