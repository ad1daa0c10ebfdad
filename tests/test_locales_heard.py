"""Values in every language, spoken by the real model and judged as ``bench.languages`` judges them
(``bench.spoken_values``): read as a native speaker reads them (the planned phonemes) and heard by
Whisper base with the language forced (Hindi: the reading only; Whisper base writes it in Urdu script).
Before issue #33, 46 of these 49 failed (``python -m streamvoice.bench.languages``, "right before"; the
three right were Spanish percentage ranges and the Japanese and Mandarin ordinals).

Each sentence is spoken once, whole piece by whole piece through the server's planner (``engine.synthesize``):
the same audio on every run, so Whisper hears it the same way every time and one take decides. A language's
sentences are heard in one Whisper pass (``Transcriber.transcribe_parts``). What the
windowed stream adds is judged apart (``test_streaming_engine.py::test_windowed_speech_transcribes_like_whole``:
streamed and whole audio are heard alike).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from streamvoice.bench.spoken_values import VALUES, heard_right, read_right
from streamvoice.engine import KokoroEngine

CASES = [(lang, value) for lang, (_, _, values) in VALUES.items() for value in values]


@pytest.fixture(scope="module")
def heard(engine: KokoroEngine, float32_transcriber: Any) -> Callable[[str, str], str]:
    """What Whisper heard of each sentence: a language's sentences are heard in one pass (joined by a second
    of silence, each word back to its sentence by its time), since Whisper pads every pass to 30 s. In
    float32: every digit counts here, and int8's kernels hear the same audio differently by CPU (Italian's
    "347 812 5590" lost a "cinque" on an Intel Xeon only: ``Transcriber.load``)."""
    by_lang: dict[str, dict[str, str]] = {}

    def of(lang: str, text: str) -> str:
        if lang not in by_lang:
            voice, whisper_lang, values = VALUES[lang]
            clips = [engine.synthesize(v.text, voice, lang=lang) for v in values]
            texts = float32_transcriber.transcribe_parts(clips, language=whisper_lang)
            by_lang[lang] = {v.text: t for v, t in zip(values, texts, strict=True)}
        return by_lang[lang][text]

    return of


@pytest.mark.parametrize(("lang", "value"), CASES, ids=[f"{lang}-{v.kind}" for lang, v in CASES])
def test_a_value_is_read_and_heard_as_a_native_speaker_says_it(
    engine: KokoroEngine, heard: Callable[[str, str], str], lang: str, value: Any
) -> None:
    planned = " ".join(piece.phonemes for piece in engine.planner.plan(value.text, lang))
    assert read_right(lang, planned, value, engine.g2p.phonemize), (value.text, planned)
    if lang == "hi":
        return
    said = heard(lang, value.text)
    assert heard_right(lang, said, value, engine.g2p.phonemize), (value.text, said)
