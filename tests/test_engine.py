"""The real Kokoro model: planning limits, audio, voices, speed, and a speech-to-text round trip."""

from __future__ import annotations

import numpy as np
import pytest

from streamvoice.bench.wer import word_error_rate
from streamvoice.engine import KokoroEngine
from streamvoice.engine.kokoro import MODEL_MAX_TOKENS
from streamvoice.engine.planning import SAFE_MAX_TOKENS, split_phonemes
from streamvoice.engine.voices import VoiceError

LONG = " ".join(
    [
        "Streaming speech matters because people notice silence long before they notice quality.",
        "A voice agent that waits for its whole answer feels broken, even when every word is right,",
        "and the fix is to start speaking the first sentence while the rest is still being written;",
        "this project does exactly that, one piece at a time, with audio leaving as soon as it exists.",
    ]
    * 6
)


def test_all_54_voices_listed(engine: KokoroEngine) -> None:
    voices = engine.voices()
    assert len(voices) == 54
    assert {v.gender for v in voices} == {"female", "male"}
    assert len({v.lang for v in voices}) == 9


def test_plan_keeps_every_call_within_model_limits(engine: KokoroEngine) -> None:
    pieces = engine.planner.plan(LONG, "en-us")
    assert len(pieces) > 3
    assert all(0 < len(p.tokens) <= SAFE_MAX_TOKENS < MODEL_MAX_TOKENS for p in pieces)
    # the first piece is the first sentence alone: that is what makes first audio fast
    assert pieces[0].text.startswith("Streaming speech matters") and pieces[0].text.endswith("quality.")
    # later pieces grow toward Kokoro's comfortable range
    assert max(len(p.tokens) for p in pieces[1:]) >= 100


def test_text_without_punctuation_is_still_split(engine: KokoroEngine) -> None:
    text = " ".join(["word"] * 600)
    pieces = engine.planner.plan(text, "en-us")
    assert all(len(p.tokens) <= SAFE_MAX_TOKENS for p in pieces)
    assert sum(p.text.count("word") for p in pieces) >= 600


def test_split_phonemes_prefers_punctuation() -> None:
    phonemes = "a" * 150 + ", " + "b" * 150 + " " + "c" * 150
    parts = [phonemes[a:b] for a, b in split_phonemes(phonemes, 200)]
    assert parts[0].endswith(",") and all(len(p) <= 200 for p in parts)
    assert "".join(parts) == phonemes.replace(" ", "")


def test_synthesis_produces_audio_scaled_by_speed(engine: KokoroEngine) -> None:
    normal = engine.synthesize("The weather is lovely today.", "af_heart", 1.0)
    fast = engine.synthesize("The weather is lovely today.", "af_heart", 1.5)
    assert normal.dtype == np.float32 and np.isfinite(normal).all()
    assert 0.05 < float(np.abs(normal).max()) <= 1.5
    assert 1.2 < normal.size / fast.size < 1.8


def test_blend_and_language_follow_voice(engine: KokoroEngine) -> None:
    blended = engine.synthesize("Good morning.", "af_heart*0.5+bm_george*0.5")
    assert blended.size > 0
    assert engine.resolve_lang(engine.parse_voice("ff_siwis"), None) == "fr-fr"
    with pytest.raises(VoiceError, match="af_heart"):
        engine.parse_voice("af_hearts")


@pytest.mark.slow
def test_speech_to_text_round_trip(engine: KokoroEngine, transcriber) -> None:  # type: ignore[no-untyped-def]
    sentences = [
        "The quick brown fox jumps over the lazy dog.",
        "Please call me back when you get home tonight.",
        "Our meeting moved to Thursday afternoon at three.",
    ]
    for sentence in sentences:
        heard = transcriber.transcribe(engine.synthesize(sentence, "af_heart"))
        assert word_error_rate(sentence, heard) <= 0.15, (sentence, heard)
