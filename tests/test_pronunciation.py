"""Pronunciation control on the session and OpenAI routes: an SSML subset (each element), misaki's inline
phonemes and lexicons (per session and per server), heard by Whisper where the words matter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from websockets.asyncio.client import connect

from streamvoice.bench.wer import word_error_rate
from streamvoice.engine import KokoroEngine
from streamvoice.text.normalize import normalize, spoken_text
from streamvoice.text.pronounce import MarkupError, ipa_to_kokoro, parse_ssml, say_as, to_segments
from tests.helpers import RunningServer, speak, start_speech_server


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
        from streamvoice.server.requests import load_lexicon

        load_lexicon(str(bad))
