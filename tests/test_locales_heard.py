"""Values in every language, spoken by the real server and judged as ``bench.languages`` judges them
(``bench.spoken_values``): read as a native speaker reads them (the planned phonemes) and heard by
Whisper base with the language forced (Hindi: the reading only; Whisper base writes it in Urdu script).
Before issue #33, 46 of these 49 failed (``python -m streamvoice.bench.languages``, "right before"; the
three right were Spanish percentage ranges and the Japanese and Mandarin ordinals)."""

from __future__ import annotations

from typing import Any

import pytest
from websockets.asyncio.client import connect

from streamvoice.bench.spoken_values import VALUES, heard_right, read_right
from streamvoice.engine import KokoroEngine
from tests.helpers import RunningServer, speak

CASES = [(lang, value) for lang, (_, _, values) in VALUES.items() for value in values]


@pytest.mark.parametrize(("lang", "value"), CASES, ids=[f"{lang}-{v.kind}" for lang, v in CASES])
async def test_a_value_is_read_and_heard_as_a_native_speaker_says_it(
    speech_server: RunningServer, engine: KokoroEngine, transcriber: Any, lang: str, value: Any
) -> None:
    voice, whisper_lang, _ = VALUES[lang]
    planned = " ".join(piece.phonemes for piece in engine.planner.plan(value.text, lang))
    assert read_right(lang, planned, value, engine.g2p.phonemize), (value.text, planned)
    if lang == "hi":
        return
    heard = []
    for attempt in range(2):  # Whisper base mishears a few percent of Kokoro's takes ("duemilaventisei"
        # as 2016); a wrong reading is wrong on every take, so a second take tells the two apart
        async with connect(speech_server.ws_url) as ws:
            event, pcm = await speak(ws, {"text": value.text, "voice": voice, "id": f"{value.kind}{attempt}"})
        assert event["type"] == "synthesis_complete", event
        heard.append(transcriber.transcribe(pcm, language=whisper_lang))
        if heard_right(lang, heard[-1], value, engine.g2p.phonemize):
            return
    raise AssertionError(f"{value.text!r} heard as {heard}")
