"""Hostile input on the pronunciation surfaces (SSML, lexicons, inline phonemes, every language's G2P),
against the real server: each attack of docs/reliability.md's table is bounded, answered with a clear code,
and never stalls another caller."""

from __future__ import annotations

import asyncio
import json
import logging
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from websockets.asyncio.client import connect

from streamvoice.engine import KokoroEngine
from streamvoice.server.requests import load_lexicon
from streamvoice.text.pronounce import MARKS, MAX_SILENCE_MS, apply_lexicon, check_lexicon
from tests.helpers import RunningServer, on_each_chunk, speak, start_speech_server, wait_for

CHAIN = "-".join(str(i % 10) for i in range(5_000))[:9_999]  # 1-2-3-...: ~n^2.8 in misaki before
LATIN_CHAIN = "-".join("ab" for _ in range(3_300))[:9_999]


@pytest.fixture(scope="module")
def server(engine: KokoroEngine) -> Iterator[RunningServer]:
    # four listeners on any machine: what these tests check is planning, not admission
    server = start_speech_server(engine, admission_listeners=4)
    yield server
    server.stop()


async def _answer(ws: Any, message: dict[str, Any]) -> dict[str, Any]:
    """The message's one answer (complete or error), with the alignment words and the audio bytes before it."""
    await ws.send(json.dumps(message))
    words: list[str] = []
    audio = 0
    async with asyncio.timeout(120):
        while True:
            frame = await ws.recv()
            if isinstance(frame, bytes):
                audio += len(frame)
                continue
            event = json.loads(frame)
            if event["type"] == "alignment":
                words += [w["word"] for w in event["words"]]
            if event["type"] in ("synthesis_complete", "error"):
                return {**event, "words": words, "audio_bytes": audio}


# --- 1. a hyphen chain (and its Latin twin through a Mandarin voice) stalls nobody ------------------------


async def test_a_hyphen_chain_takes_one_planning_turn_at_a_time(
    server: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two attackers (a 10,000-character hyphen chain on a session, its Latin twin through a Mandarin voice
    over HTTP) and an ordinary caller share the one planning thread: the caller's chunk is planned within a
    turn per attacker of each of its own planning steps, not after the chains. Before, the chain held the
    thread for 23 s (first audio 0.2 s normally). What a turn costs is bounded apart
    (``tests/test_g2p_bounds.py``); the effect on heard onset is measured by ``python -m
    streamvoice.bench.hostile`` (README, results)."""
    planner = server.drainer.app.state.service.engine.planner
    turns: list[str] = []  # who each planned chunk belonged to, in the planning thread's order
    on_each_chunk(
        monkeypatch, planner, lambda chunk: turns.append("caller" if "booked" in chunk else "attacker")
    )
    sentence = {"type": "synthesize", "text": "Your table for four is booked for seven tonight."}
    async with connect(server.ws_url) as attacker, httpx.AsyncClient(timeout=120) as http:
        await attacker.send(json.dumps({"type": "synthesize", "text": CHAIN, "id": "chain"}))
        speech = http.post(
            server.url + "/v1/audio/speech",
            json={"input": LATIN_CHAIN, "voice": "zf_xiaobei", "response_format": "pcm"},
        )
        attack = asyncio.ensure_future(speech)
        await wait_for(lambda: turns.count("attacker") >= 4, timeout=120)  # both chains are being planned
        before = len(turns)
        async with connect(server.ws_url) as caller:
            assert (await _answer(caller, sentence))["type"] == "synthesis_complete"
        await attacker.send(json.dumps({"type": "cancel"}))
        attack.cancel()
    after = turns[before:]
    assert "caller" in after, after
    # the caller's message takes three steps on the thread (markup, chunking, its chunk); before each, at
    # most one turn per attacker
    assert after.index("caller") <= 2 * 3, after
    assert turns.count("attacker") >= 4 + after.index("caller")


# --- 2. failures inside planning: a clear code or a fallback reading, never synthesis_failed ---------------


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ({"text": "<speak>" + "<p>" * 1000 + "deep" + "</p>" * 1000 + "</speak>"}, "invalid_ssml"),
        ({"text": '<speak>x <break time="soon"/></speak>'}, "invalid_ssml"),
        ({"text": "<speak>a <prosody rate='zoom'>b</prosody></speak>"}, "invalid_ssml"),
        ({"text": '<speak><say-as interpret-as="cardinal">²</say-as> apples</speak>'}, None),
        (
            {"text": '<speak><say-as interpret-as="cardinal">' + "7" * 5_000 + "</say-as></speak>"},
            "invalid_ssml",
        ),
        ({"text": "電話は09012345678です", "voice": "jf_alpha"}, None),
        ({"text": "円周率は3.14159265358979です", "voice": "jf_alpha"}, None),
        ({"text": "今天龶很好", "voice": "zf_xiaobei"}, None),
        ({"text": "龶", "voice": "zf_xiaobei"}, "invalid_field"),
        ({"text": "<speaker>Ann</speaker> says hello."}, None),  # plain text that merely starts with a tag
    ],
)
async def test_planning_failures_get_a_clear_code_or_a_fallback_reading(
    server: RunningServer, message: dict[str, Any], code: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with connect(server.ws_url) as ws:
        answer = await _answer(ws, {"type": "synthesize", **message})
        if code is None:
            assert answer["type"] == "synthesis_complete" and answer["audio_ms"] > 0, answer
        else:
            assert answer["type"] == "error" and answer["code"] == code, answer
            if code == "invalid_ssml":
                assert "at character" in answer["message"] and "at character 0)" not in answer["message"]
        assert (await _answer(ws, {"type": "synthesize", "text": "Still here."}))[
            "type"
        ] == "synthesis_complete"
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "09012345678" not in logged and "龶" not in logged  # no caller text in the log
    assert not any(r.exc_info for r in caplog.records)  # and no traceback


# --- 3. spans are never cut inside; no private mark reaches a caller; over-long spans refused ---------------


@pytest.mark.parametrize(
    "text",
    [
        f'<speak><sub alias="{"hello " * 300}">hi</sub></speak>',
        f'<speak><phoneme ph="{"ʃa" * 400}">sha</phoneme></speak>',
        f'<speak><say-as interpret-as="characters">{"abcd" * 100}</say-as></speak>',
    ],
)
async def test_an_over_long_span_is_refused_with_its_position(server: RunningServer, text: str) -> None:
    async with connect(server.ws_url) as ws:
        answer = await _answer(ws, {"type": "synthesize", "text": text})
    assert answer["type"] == "error" and answer["code"] == "invalid_ssml"
    assert "the limit is 200" in answer["message"] and "at character 7)" in answer["message"]


async def test_spans_stay_whole_and_no_internal_mark_reaches_a_caption(server: RunningServer) -> None:
    # A span of ~190 characters makes a piece longer than the chunker's largest (250 estimated tokens with
    # its written form): the cut goes before or after it, never inside (it was cut mid-span, and captions
    # carried U+E000 and the raw alias).
    alias = ("the quick brown fox jumps over the lazy dog " * 5)[:190].strip()
    span = f'<sub alias="{alias}">fox</sub>'
    text = f"<speak>First {span} then {span}.</speak>"
    async with connect(server.ws_url) as ws:
        answer = await _answer(ws, {"type": "synthesize", "text": text, "speed": 2.0})
    assert answer["type"] == "synthesis_complete", answer
    assert answer["words"] and not any(ch in MARKS for word in answer["words"] for ch in word)
    assert sum(w.startswith("fox") for w in answer["words"]) == 2, answer["words"]  # each span one word


# --- 4. say-as reads in the voice's language ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("voice", "text", "lang", "heard_any", "never"),
    [
        (
            "jf_alpha",
            '<speak><say-as interpret-as="cardinal">12</say-as>個あります</speak>',
            "ja",
            ("12", "十二"),
            "twelve",
        ),
        (
            "ef_dora",
            '<speak>Tengo <say-as interpret-as="cardinal">25</say-as> manzanas</speak>',
            "es",
            ("25", "veinticinco"),
            "twenty",
        ),
    ],
)
async def test_say_as_reads_numbers_in_the_voices_language(
    server: RunningServer,
    transcriber: Any,
    voice: str,
    text: str,
    lang: str,
    heard_any: tuple[str, ...],
    never: str,
) -> None:
    async with connect(server.ws_url) as ws:
        answer, pcm = await speak(ws, {"type": "synthesize", "text": text, "voice": voice}, timeout=60)
    assert answer["type"] == "synthesis_complete"
    heard = transcriber.transcribe(np.asarray(pcm, dtype=np.float32), language=lang).lower()
    assert any(h in heard for h in heard_any) and never not in heard, heard


# --- 5. lexicon values are checked like text ---------------------------------------------------------------


async def test_a_lexicon_value_that_is_not_text_is_refused_and_later_messages_speak(
    server: RunningServer,
) -> None:
    async with connect(server.ws_url) as ws:
        await ws.send('{"type": "configure", "lexicon": {"Kokoro": "\\ud800"}}')
        refused = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert (
            refused["type"] == "error"
            and refused["code"] == "invalid_field"
            and "U+D800" in refused["message"]
        )
        answer = await _answer(ws, {"type": "synthesize", "text": "Kokoro speaks."})
        assert answer["type"] == "synthesis_complete"


def test_a_lexicon_file_that_is_not_text_stops_the_start(tmp_path: Path) -> None:
    bad = tmp_path / "lexicon.json"
    bad.write_text('{"Kokoro": "koh\\udc80ro"}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"lexicon.json.*U\+DC80"):
        load_lexicon(str(bad))


# --- 6. compiled lexicon patterns are bounded in memory ------------------------------------------------------


def test_lexicon_patterns_are_bounded_in_memory() -> None:
    def lexicon(k: int) -> dict[str, str]:
        return {f"word{k}x{i}": f"said {i}" for i in range(460)}

    for k in range(70):  # fill the cache of 64 compiled lexicons
        apply_lexicon("a word here", lexicon(k))
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for k in range(70, 230):  # each compiles anew and evicts one
        apply_lexicon("a word here", lexicon(k))
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    # Before: re's own cache kept up to 512 more compiled lexicons beside ours (+25 MB after 80 sessions).
    assert grown < 8 << 20, f"{grown / 2**20:.1f} MB"


def test_a_lexicon_word_must_be_a_word() -> None:
    with pytest.raises(ValueError, match="punctuation"):
        check_lexicon({"-" * 120 + ".x": "x"})  # 460 of these blocked the planner 0.43 s a message
    with pytest.raises(ValueError, match="no letter or digit"):
        check_lexicon({"...": "dots"})
    assert check_lexicon({"AT&T": "A T and T", "e.g.": "for example", "C++": "C plus plus"})


# --- 7. generated silence is capped per message -------------------------------------------------------------


async def test_breaks_and_pauses_are_capped_per_message(server: RunningServer) -> None:
    breaks = 'a<break time="5s"/>' * (MAX_SILENCE_MS // 5_000 + 1)
    async with connect(server.ws_url) as ws:
        answer = await _answer(ws, {"type": "synthesize", "text": f"<speak>{breaks}</speak>"})
        assert answer["type"] == "error" and answer["code"] == "invalid_ssml"
        assert f"more than {MAX_SILENCE_MS // 1000} s of silence" in answer["message"]
        # The same through punctuation: paragraph pauses of 3 s after almost nothing to say.
        await ws.send(json.dumps({"type": "configure", "pauses": {"paragraph_ms": 3000}}))
        assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "configured"
        answer = await _answer(ws, {"type": "synthesize", "text": "A.\n\n" * 2_000})
        assert answer["type"] == "error" and answer["code"] == "invalid_field", answer
        assert "pauses and breaks" in answer["message"]
        # refused within the first minute of it, not after 100 (24 kHz, 16-bit: 48,000 bytes a second)
        assert answer["audio_bytes"] < 60 * 48_000, answer["audio_bytes"]
