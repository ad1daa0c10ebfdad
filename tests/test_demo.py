"""What the demo writes: the two WAVs as the listener heard them (the wait included), and the timeline of
both modes, from real turns of the real agent (a scripted LLM, so the answer is known)."""

from __future__ import annotations

import json
import wave
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from streamvoice.agent.llm import ScriptedTextSource
from streamvoice.audio.levels import heard_onset, silent_gaps
from streamvoice.bench.wer import word_error_rate
from streamvoice.client.agent_turns import RunResult, measure
from streamvoice.demo import write_outputs
from streamvoice.protocol import SAMPLE_RATE
from tests.helpers import RunningServer, start_agent

ANSWER = (
    "The sky looks blue because air scatters blue light more than red. At sunset the light travels further."
)


def _stalls_shortened(audio: np.ndarray, keep_ms: float = 300.0) -> np.ndarray:
    """The track with every silence inside it cut to ``keep_ms``: on a loaded CI machine the stalls are
    seconds long, and greedy Whisper fills a long silence inside a sentence with a loop ("blue, blue, blue,
    ..." for a 20.8 s track of 7 s of speech), which tests Whisper, not the words that were sent."""
    keep = round(keep_ms * SAMPLE_RATE / 1000)
    parts, at = [], 0
    for start_ms, end_ms in silent_gaps(audio, SAMPLE_RATE, min_ms=keep_ms):
        start, end = round(start_ms * SAMPLE_RATE / 1000), round(end_ms * SAMPLE_RATE / 1000)
        parts.append(audio[at : start + keep])
        at = end
    return np.concatenate([*parts, audio[at:]])


@pytest.mark.slow
def test_the_demo_writes_what_it_measured(
    speech_server: RunningServer, transcriber: Any, tmp_path: Path
) -> None:
    agent = start_agent(ScriptedTextSource(ANSWER, ttft_s=0.3, tokens_per_s=25), speech_server.url)
    try:
        kept: list[RunResult] = []
        summary = measure(agent.url, "Why is the sky blue?", 1, keep=kept)
    finally:
        agent.stop()
    runs = {r.mode: r for r in kept}
    written = write_outputs(tmp_path, runs, "Why is the sky blue?")
    assert {p.name for p in written} == {"bidi.wav", "batch.wav", "timeline.png", "timeline.json"}
    for mode in ("bidi", "batch"):
        with wave.open(str(tmp_path / f"{mode}.wav")) as wav:
            assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (SAMPLE_RATE, 1, 2)
            pcm = np.frombuffer(wav.readframes(wav.getnframes()), "<i2")
        audio = pcm.astype(np.float32) / 32768
        # the speech that was measured (every word, whatever the stalls), and the wait before it is in the file
        assert word_error_rate(ANSWER, transcriber.transcribe(_stalls_shortened(audio))) < 0.25
        onset = heard_onset([(0.0, pcm.size * 2)], pcm.tobytes(), SAMPLE_RATE)
        assert onset is not None and abs(onset * 1000 - runs[mode].heard_ms) < 150, (
            mode,
            onset,
            runs[mode].heard_ms,
        )
    # What the picture shows, as the order of events, not as two wall-clock onsets (one run each; a busy
    # neighbour swapped them in CI): bidi's server cut the answer into pieces as it was written (below),
    # batch sent one piece and spoke only after the LLM's last text.
    batch = runs["batch"]
    assert batch.pieces[0][0] >= batch.texts[-1][0]
    assert batch.first_audio_ms is not None and batch.first_audio_ms >= batch.texts[-1][0]
    timeline = json.loads((tmp_path / "timeline.json").read_text())
    assert set(timeline) == {"bidi", "batch"}
    assert len(timeline["bidi"]["pieces"]) > 1 and len(timeline["batch"]["pieces"]) == 1
    assert timeline["bidi"]["texts"] and timeline["bidi"]["arrivals"]
    assert (tmp_path / "timeline.png").stat().st_size > 10_000
    assert summary["ratio_batch_over_bidi_heard"] is not None
