"""Pronunciation control on the session and OpenAI routes: an SSML subset (each element), misaki's inline
phonemes and lexicons (per session and per server), heard by Whisper where the words matter."""

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

from streamvoice.bench.wer import word_error_rate
from streamvoice.engine import KokoroEngine
from streamvoice.server.core.requests import load_lexicon
from streamvoice.text.lexicon import apply_lexicon, check_lexicon
from streamvoice.text.marks import MARKS, PHONEMES, SAY
from streamvoice.text.normalize import normalize, spoken_text
from streamvoice.text.pronounce import (
    MAX_SILENCE_MS,
    MarkupError,
    ipa_to_kokoro,
    parse_ssml,
    say_as,
    to_segments,
)
from tests.helpers import RunningServer, cpu_seconds, on_each_chunk, speak, start_speech_server, wait_for


def said(text: str, lexicon: dict[str, str] | None = None) -> list[str]:
    return [spoken_text(normalize(s.text)) for s in to_segments(text, None, lexicon or {})]


# --- each element, as text --------------------------------------------------------------------------------


def test_break_cuts_a_segment_with_its_pause() -> None:
    segments = parse_ssml('<speak>Wait <break time="750ms"/> now <break time="2s"/> go.</speak>')
    assert [(s.text.strip(), s.pause_ms) for s in segments] == [("Wait", 750), ("now", 2000), ("go.", None)]
    assert parse_ssml('<speak>a <break strength="strong"/> b</speak>')[0].pause_ms == 700


def test_sub_say_as_and_unknown_tags() -> None:
    assert said('<speak><sub alias="World Wide Web Consortium">W3C</sub> rules.</speak>') == [
        "World Wide Web Consortium rules."
    ]
    assert say_as("NASA", "characters") == "N A S A"
    assert say_as("42", "cardinal") == "forty-two" and say_as("3rd", "ordinal") == "third"
    assert say_as("2024", "digits") == "two zero two four"
    assert say_as("555-1234", "telephone") == "five five five, one two three four"
    assert said('<speak>On <say-as interpret-as="date">Dec. 5th</say-as> at <say-as interpret-as="time">3pm</say-as>.</speak>') == [
        "On December fifth at three p m."
    ]  # fmt: skip
    # unknown tags are spoken as their text, never dropped with it
    assert said("<speak><emphasis>Really</emphasis> <custom>kept</custom> here.</speak>") == [
        "Really kept here."
    ]


def test_phoneme_ipa_is_converted_to_kokoro_symbols() -> None:
    assert ipa_to_kokoro("təˈmeɪtoʊ") == "təˈmAtO"
    assert ipa_to_kokoro("ˈtʃɜːtʃ") == "ˈʧɜʧ"
    tokens = normalize(
        to_segments('<speak><phoneme ph="pɪˈkɑːn">pecan</phoneme> pie</speak>', None, {})[0].text
    )
    assert [t.original for t in tokens] == ["pecan", "pie"]


def test_prosody_rate_sets_the_segments_rate() -> None:
    segments = parse_ssml(
        '<speak>Normal. <prosody rate="slow">Slow part.</prosody> <prosody rate="150%">Fast.</prosody></speak>'
    )
    assert [(s.text.strip(), s.rate) for s in segments if s.text.strip()] == [
        ("Normal.", 1.0),
        ("Slow part.", 0.8),
        ("Fast.", 1.5),
    ]  # fmt: skip


def test_malformed_ssml_says_where() -> None:
    with pytest.raises(MarkupError) as caught:
        parse_ssml("<speak>Hello <break time='1s'> there</speak>")
    assert caught.value.position > 0
    with pytest.raises(MarkupError):
        parse_ssml('<!DOCTYPE x [<!ENTITY a "aaaa">]><speak>&a;</speak>')
    with pytest.raises(MarkupError):
        parse_ssml('<speak><break time="soon"/></speak>')


def test_inline_phonemes_and_lexicon_keep_the_callers_words() -> None:
    text = to_segments("Try [Kokoro](/kəkˈɔɹO/) with SQL.", None, {"SQL": "sequel"})[0].text
    tokens = normalize(text)
    assert [t.original for t in tokens if t.original.strip(".")] == ["Try", "Kokoro", "with", "SQL"]
    assert "sequel" in spoken_text(tokens)


# --- on the routes, with the real model ------------------------------------------------------------------


@pytest.mark.slow
async def test_ssml_and_lexicon_on_the_session(speech_server: RunningServer, transcriber: Any) -> None:
    async with connect(speech_server.ws_url) as ws:
        done, audio = await speak(
            ws,
            {
                "text": '<speak>I work at the <sub alias="World Wide Web Consortium">W3C</sub>.</speak>',
                "id": "s",
            },
        )
        assert done["type"] == "synthesis_complete"
        assert (
            word_error_rate("I work at the World Wide Web Consortium", transcriber.transcribe(audio)) <= 0.2
        )
        # a break is silence of that length inside the answer
        done, plain = await speak(ws, {"text": "<speak>One. Two.</speak>", "id": "p"})
        done, paused = await speak(ws, {"text": '<speak>One. <break time="1500ms"/> Two.</speak>', "id": "b"})
        assert paused.size - plain.size > 0.9 * 24_000
        # prosody rate: slower speech is longer
        done, slow = await speak(
            ws,
            {"text": '<speak><prosody rate="x-slow">One two three four five.</prosody></speak>', "id": "r"},
        )
        done, normal = await speak(ws, {"text": "<speak>One two three four five.</speak>", "id": "n"})
        assert slow.size > 1.25 * normal.size
        # malformed markup: invalid_ssml with the position, and the session goes on
        done, _ = await speak(ws, {"text": "<speak>Hi <b>there</speak>", "id": "bad"})
        assert (
            done["type"] == "error" and done["code"] == "invalid_ssml" and "at character" in done["message"]
        )
        # a session lexicon
        await ws.send(json.dumps({"type": "configure", "lexicon": {"Zyx": "zebra"}}))
        ack = json.loads(await ws.recv())
        assert ack["type"] == "configured" and ack["lexicon_entries"] == 1
        done, audio = await speak(ws, {"text": "I saw a Zyx today.", "id": "lex"})
        heard = transcriber.transcribe(audio).lower()
        assert "zebra" in heard, heard
        await ws.send(json.dumps({"type": "configure", "lexicon": ["not", "a", "map"]}))
        assert json.loads(await ws.recv())["code"] == "invalid_field"
        # inline phonemes, say-as, phoneme
        done, audio = await speak(
            ws, {"text": 'Spell <say-as interpret-as="characters">cat</say-as>.', "ssml": True, "id": "sa"}
        )
        assert done["type"] == "synthesis_complete"
        done, audio = await speak(ws, {"text": "I said [tomato](/təmˈɑtO/) today.", "id": "in"})
        assert done["type"] == "synthesis_complete" and audio.size > 0


@pytest.mark.slow
def test_ssml_on_the_openai_route_and_a_server_lexicon(
    engine: KokoroEngine, tmp_path: Path, transcriber: Any
) -> None:
    lexicon = tmp_path / "lexicon.json"
    lexicon.write_text(json.dumps({"Nginx": "engine x"}))
    server = start_speech_server(engine, warm_up=False, lexicon_file=str(lexicon))
    try:
        body = {"input": "We run Nginx.", "response_format": "pcm"}
        r = httpx.post(server.url + "/v1/audio/speech", json=body, timeout=60)
        pcm = np.frombuffer(r.content, "<i2").astype(np.float32) / 32768
        assert "engine" in transcriber.transcribe(pcm).lower()
        body = {"input": '<speak>Hello <break time="1s"/> there.</speak>', "response_format": "pcm"}
        assert httpx.post(server.url + "/v1/audio/speech", json=body, timeout=60).status_code == 200
        body = {"input": "<speak>Hello <break></speak>", "response_format": "pcm"}
        r = httpx.post(server.url + "/v1/audio/speech", json=body, timeout=60)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_ssml"
        body = {"input": "Plain <b>text</b>", "ssml": False, "response_format": "pcm"}
        assert httpx.post(server.url + "/v1/audio/speech", json=body, timeout=60).status_code == 200
    finally:
        server.stop()
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="LEXICON_FILE"):
        from streamvoice.server.core.requests import load_lexicon

        load_lexicon(str(bad))


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


async def test_the_text_limit_counts_what_the_lexicon_makes_spoken(server: RunningServer) -> None:
    """Issue #64: an alias of 128 characters for "a", then "a" said often, spoke ~64x what the 10,000
    character limit allows: the limit was checked on the written text, before the lexicon. It is the
    spoken text's now, and the refusal says so before any audio."""
    alias = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november " * 2
    async with connect(server.ws_url) as ws:
        await ws.send(json.dumps({"type": "configure", "lexicon": {"a": alias[:128]}}))
        assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "configured"
        answer = await _answer(ws, {"type": "synthesize", "text": "a " * 100})  # 200 written, 12,900 said
    assert answer["type"] == "error" and answer["code"] == "text_too_long", answer
    assert "lexicon" in answer["message"] and answer["audio_bytes"] == 0


def test_a_lexicon_file_that_is_not_text_stops_the_start(tmp_path: Path) -> None:
    bad = tmp_path / "lexicon.json"
    bad.write_text('{"Kokoro": "koh\\udc80ro"}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"lexicon.json.*U\+DC80"):
        load_lexicon(str(bad))


# --- 6. a lexicon costs the same, new or known; nothing of it is kept -------------------------------------


def test_a_new_combination_of_lexicons_costs_what_a_known_one_does() -> None:
    """Issue #64: one compiled pattern per combination of lexicons: 3 x 512 long words cost 1.1-1.5 s of
    planning for each new combination (against well under a millisecond once compiled)."""

    def lexicon(k: int) -> dict[str, str]:
        return {f"w{k}x{i}x" + "abcdefghij" * 11: "said" for i in range(512)}

    merged = [{**lexicon(1), **lexicon(2), **lexicon(3), f"extra{n}": "x"} for n in range(8)]
    text = "An ordinary sentence, with w1x0x" + "abcdefghij" * 11 + " in it. " * 3
    known = cpu_seconds(lambda: apply_lexicon(text, merged[0]), repeat=5)
    fresh = iter(merged[1:])
    new = cpu_seconds(lambda: apply_lexicon(text, next(fresh)), repeat=5)
    assert new < 3 * known + 0.002, (new, known)


def test_lexicon_words_are_matched_whole_longest_first_in_any_case() -> None:
    lexicon = {"New York": "/nˈuː jˈɔːk/", "York": "Yorick", ".NET": "dot net", "AT&T": "A T and T"}
    said = apply_lexicon("new york, York, Yorkshire, .net and AT&T.", lexicon)
    assert said.count(PHONEMES) == 1 and said.count(SAY) == 3
    assert "Yorkshire" in said  # not a whole word: untouched
    assert apply_lexicon("no match here", lexicon) == "no match here"


def test_lexicons_keep_nothing_in_memory() -> None:
    def lexicon(k: int) -> dict[str, str]:
        return {f"word{k}x{i}": f"said {i}" for i in range(460)}

    for k in range(10):
        apply_lexicon("a word here", lexicon(k))
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for k in range(10, 90):
        apply_lexicon("a word here", lexicon(k))
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    # A compiled pattern per lexicon once grew +25 MB after 80 sessions (re's own cache); nothing is kept now.
    assert grown < 1 << 20, f"{grown / 2**20:.1f} MB"


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
