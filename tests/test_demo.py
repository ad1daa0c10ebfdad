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
from streamvoice.audio.levels import heard_onset
from streamvoice.bench.wer import word_error_rate
from streamvoice.client.agent_turns import RunResult, measure
from streamvoice.demo import placements, write_outputs
from streamvoice.protocol import SAMPLE_RATE
from tests.helpers import RunningServer, start_agent

ANSWER = (
    "The sky looks blue because air scatters blue light more than red. At sunset the light travels further."
)


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
        # Every chunk the listener was sent is in the file where it played (the wait and any stall are
        # silence there), and what was sent is the answer. Whisper hears what was sent, not the file: on a
        # loaded CI machine the stalls are seconds long, and greedy Whisper filled one inside a sentence with
        # "blue, blue, blue, ..." (a 20.8 s file of 7 s of speech), and cut to 300 ms, stalls inside words
        # were heard as other words; neither is what this test is about.
        sent = np.frombuffer(runs[mode].pcm, "<i2")
        taken = 0
        for start, n in placements(runs[mode]):
            assert np.array_equal(pcm[start : start + n], sent[taken : taken + n])
            taken += n
        assert taken == sent.size and pcm.size == start + n
        heard = transcriber.transcribe(sent.astype(np.float32) / 32768)
        assert word_error_rate(ANSWER, heard) < 0.25, heard
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
