"""In-piece streaming: the split graph reproduces whole-piece audio, windows concatenate to the right length
and sound the same, and a graph that cannot split falls back with a log line."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamvoice.audio.levels import trailing_silence_ms
from streamvoice.engine import KokoroEngine
from streamvoice.engine.streaming.windows import WindowPlan, crossfade
from streamvoice.engine.timing import RELEASE_MS
from streamvoice.model_files import ModelFiles

SENTENCE = "The museum opens at nine in the morning, and the guided tours start every half hour after that."


@given(st.integers(1, 2000), st.integers(1, 40), st.integers(1, 40), st.floats(1.0, 4.0), st.integers(1, 400))
def test_window_plan_tiles_every_frame_once(
    frames: int, first: int, second: int, growth: float, largest: int
) -> None:
    plan = WindowPlan(first=first, second=second, growth=growth, largest=max(largest, first, second))
    spans = plan.windows(frames)
    assert spans[0][0] == 0 and spans[-1][1] == frames
    assert all(a < b for a, b in spans)
    assert all(prev[1] == nxt[0] for prev, nxt in itertools.pairwise(spans))
    # Uncapped, the sizes follow the plan: first, second, then growing by ``growth`` up to ``largest``; only
    # the last window differs, holding what is left (a tail under half a window is folded into it).
    sizes = [b - a for a, b in spans]
    intended = [plan.first, plan.second]
    while len(intended) < len(sizes):
        intended.append(min(plan.largest, max(intended[-1] + 1, int(intended[-1] * plan.growth))))
    assert sizes[:-1] == intended[: len(sizes) - 1]
    assert sizes[-1] <= intended[len(sizes) - 1] + intended[len(sizes) - 1] // 2 + 1


@given(st.integers(1, 2000), st.lists(st.one_of(st.none(), st.integers(1, 60)), min_size=1, max_size=30))
def test_capped_windows_tile_every_frame_and_respect_the_cap(frames: int, caps: list[int | None]) -> None:
    """A cap asked before each window (the server's budgets) bounds that window, its folded tail included."""
    asked = iter(caps * (frames + 1))
    seen: list[int | None] = []

    def cap() -> int | None:
        seen.append(next(asked))
        return seen[-1]

    spans = list(WindowPlan().iter_windows(frames, cap))
    assert spans[0][0] == 0 and spans[-1][1] == frames
    assert all(prev[1] == nxt[0] for prev, nxt in itertools.pairwise(spans))
    for (a, b), limit in zip(spans, seen, strict=True):
        if limit is not None:  # a small tail is folded in only within the cap (else: two halves)
            assert b - a <= limit
    uncapped = WindowPlan().windows(frames)
    assert len(spans) >= len(uncapped)  # a cap only ever shortens windows, never merges them


def test_a_window_of_wide_from_frames_or_more_takes_the_wide_context() -> None:
    """Context costs a window its decoding time, so the first window keeps its own margins (onset), small
    windows (a loaded server's) keep ``context``, and only wide windows, where two frames more a side are
    under a tenth of the call, take ``wide_context``."""
    plan = WindowPlan()
    assert plan.wide_context > plan.context
    (first, *later) = plan.windows(400)
    assert plan.margins(*first) == (plan.lead_context, plan.lookahead)
    for a, b in later:
        left, right = plan.margins(a, b)
        assert left == right == (plan.wide_context if b - a >= plan.wide_from else plan.context)
    assert plan.margins(10, 10 + plan.wide_from - 1) == (plan.context, plan.context)


def test_crossfade_of_identical_renditions_is_the_signal() -> None:
    x = np.sin(np.linspace(0, 60, 240)).astype(np.float32) + 0.1 * np.random.default_rng(0).normal(
        size=240
    ).astype(np.float32)
    np.testing.assert_allclose(crossfade(x, x), x, atol=1e-5)
    assert crossfade(x[:0], x[:0]).size == 0


def test_crossfade_keeps_high_band_power_of_uncorrelated_renditions() -> None:
    rng = np.random.default_rng(1)
    n = 2400
    voice = np.sin(2 * np.pi * 200 * np.arange(n) / 24_000).astype(np.float32)  # shared low band
    a = voice + 0.05 * rng.normal(size=n).astype(np.float32)  # each call's own high-frequency noise
    b = voice + 0.05 * rng.normal(size=n).astype(np.float32)
    mixed = crossfade(a, b)
    linear = a * (1 - np.linspace(0, 1, n)) + b * np.linspace(0, 1, n)
    mid = slice(n // 3, 2 * n // 3)

    def step_power(x: np.ndarray) -> float:
        return float(np.mean(np.diff(x[mid]) ** 2))

    assert step_power(linear) < 0.8 * step_power(a)  # the dip a linear fade leaves
    assert 0.85 < step_power(mixed) / step_power(a) < 1.15
    assert float(np.max(np.abs(mixed - voice))) < 0.3  # the shared band passes untouched


@pytest.mark.parametrize("text", ["Yes.", SENTENCE])  # a longer text is more pieces of this size
def test_windows_concatenate_to_the_whole_piece_length(engine: KokoroEngine, text: str) -> None:
    spec = engine.parse_voice("af_heart")
    for piece in engine.planner.plan(text, "en-us"):
        whole = engine.synthesize_piece(piece, spec, 1.0)
        chunks = list(engine.stream_piece(piece, spec, 1.0))
        windowed = np.concatenate(chunks)
        # Both are trimmed at their first and last audible 5 ms block, and a windowed decode's fade into
        # silence is not sample-identical to the whole piece's: the ends may differ by a few blocks.
        assert abs(windowed.size - whole.size) <= 2_400  # 100 ms
        if len(piece.tokens) > 40:
            assert len(chunks) > 2  # it really streamed
            assert chunks[0].size < whole.size / 3


@pytest.mark.parametrize("cap", [3, 8, 12])
def test_every_capped_split_of_a_short_reply_ends_with_its_release(engine: KokoroEngine, cap: int) -> None:
    """A server under load caps windows (``iter_windows``), so a reply's sound may end at one window's edge
    and decay in the next, which is all below the audible threshold: the release still follows it. Before
    the trim carried its release across chunks, af_heart's "and then" ended 5 ms after its sound at 12
    frames (the listener test's pause, in CI), and 45 of 728 (voice, reply, cap) were off the release by
    over 15 ms (ad hoc: 8 voices, 13 replies, caps 3-16 and none); 7 with the carried release alone (a slow
    decay past the decoded frames: ``TAIL_FRAMES``), none with both."""
    spec = engine.parse_voice("af_heart")
    for text in ("and then", "No worries.", "Great, see you then!", "so"):
        [piece] = engine.planner.plan(text, "en-us")
        audio = np.concatenate(list(engine.stream_piece(piece, spec, 1.0, cap=lambda: cap)))
        tail = trailing_silence_ms(audio, 24_000)
        assert tail is not None and abs(tail - RELEASE_MS) <= 5, (text, tail)


# The streamed bar, guarded per sentence (issue #66: a mean over four let one sentence fall to 1.9 unseen), on
# three voices (both accents, both genders; af_heart is the listener tests') and two sentences each, neither in
# the speech estimate's fit (``bench.fit_speech_estimate``), from the voice's cached statistics (what a server
# starts with) and the static-int8 graph every machine derives alike (the shipped ranges). Measured 2026-12-07
# (Intel Xeon, commit 3914f47) with the whole-piece estimate at each voice's share and gain: lowest 2.64
# (bm_george), voices' means 2.96 (bm_george), 3.46, 3.62; loudness 0.96-1.08 (the speech-only estimate on
# 2026-12-06: lowest 2.53, means 2.80-3.27; before any estimate: lowest 2.03, means 2.41-2.59). Six pieces: each costs
# ~2 s of CPU here, ~6 s beside a busy core. What the streamed audio lacks against the whole piece, and why,
# is ``python -m streamvoice.bench.stream_breakdown``'s (docs/benchmarks.md 7b).
CLOSE_TO_WHOLE = (
    "Your package left our warehouse on Monday and is now with the courier.",
    "Please hold while I transfer your call to the next available agent.",
)
GUARDED_VOICES = ("af_bella", "am_michael", "bm_george")
SENTENCE_FLOOR = 2.2  # each sentence
VOICE_FLOOR = 2.5  # each voice's mean


def test_windowed_audio_stays_close_to_whole(engine: KokoroEngine) -> None:
    """Every sentence of every voice, streamed, against the same piece decoded whole (both trimmed at their
    own first audible block; PESQ aligns them itself), and its loudness within a quarter."""
    from tests.test_listener import pesq_against

    low: list[tuple[str, str, float]] = []
    for voice in GUARDED_VOICES:
        spec = engine.parse_voice(voice)
        stats, silence = engine.voice_stats(voice), engine.memory.silence(spec)
        assert stats is not None, f"{voice}: no cached statistics (the suite's start calibrates every voice)"
        scores = []
        for text in CLOSE_TO_WHOLE:
            piece = engine.planner.plan(text, "en-us")[0]
            engine.set_voice_stats(voice, stats, silence)  # each piece from the same statistics
            whole = engine.synthesize_piece(piece, spec, 1.0)
            engine.set_voice_stats(voice, stats, silence)
            windowed = np.concatenate(list(engine.stream_piece(piece, spec, 1.0)))
            scores.append(pesq_against(whole, windowed))
            ratio = float(np.sqrt(np.mean(windowed**2)) / np.sqrt(np.mean(whole**2)))
            assert 0.8 < ratio < 1.25, (voice, text, ratio)
            if scores[-1] < SENTENCE_FLOOR:
                low.append((voice, text, scores[-1]))
        engine.set_voice_stats(voice, stats, silence)
        assert float(np.mean(scores)) >= VOICE_FLOOR, (voice, scores)
    assert not low, low


@pytest.mark.slow
@pytest.mark.parametrize(
    ("lang", "text"),
    [
        ("en-us", SENTENCE),
        # "au" starts two frames into the third window: with four frames of left context it was heard
        # "Nous allons marcher" (``WindowPlan.wide_context``). One word decides, so float32 hears it.
        ("fr-fr", "Nous allons au marché demain matin."),
    ],
)
def test_windowed_speech_transcribes_like_whole(  # type: ignore[no-untyped-def]
    engine: KokoroEngine, float32_transcriber, lang: str, text: str
) -> None:
    from streamvoice.bench.languages import SENTENCES
    from streamvoice.bench.wer import word_error_rate

    voice, language, _ = SENTENCES[lang]  # the language's voice and Whisper's code for it
    spec = engine.parse_voice(voice)
    piece = engine.planner.plan(text, lang)[0]
    whole = engine.synthesize_piece(piece, spec, 1.0)
    windowed = np.concatenate(list(engine.stream_piece(piece, spec, 1.0)))
    wer_whole = word_error_rate(text, float32_transcriber.transcribe(whole, language=language))
    wer_windowed = word_error_rate(text, float32_transcriber.transcribe(windowed, language=language))
    assert wer_windowed <= wer_whole + 0.05, (text, wer_whole, wer_windowed)


def test_graph_that_cannot_split_falls_back(
    tmp_path: Path, kokoro_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A model with Kokoro's inputs and output but no decoder inside: whole-piece synthesis, and a log line."""
    import onnx
    from onnx import TensorProto, helper

    tokens = helper.make_tensor_value_info("tokens", TensorProto.INT64, [1, "n"])
    style = helper.make_tensor_value_info("style", TensorProto.FLOAT, [1, 256])
    speed = helper.make_tensor_value_info("speed", TensorProto.FLOAT, [1])
    audio = helper.make_tensor_value_info("audio", TensorProto.FLOAT, ["samples"])
    nodes = [
        helper.make_node("Cast", ["tokens"], ["tf"], to=TensorProto.FLOAT),
        helper.make_node(
            "Constant", [], ["shape"], value=helper.make_tensor("s", TensorProto.INT64, [1], [-1])
        ),
        helper.make_node("Reshape", ["tf", "shape"], ["flat"]),
        helper.make_node("Mul", ["flat", "speed"], ["audio"]),
    ]
    graph = helper.make_graph(nodes, "not-kokoro", [tokens, style, speed], [audio])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "kokoro-v1.0.onnx"
    onnx.save(model, str(path))
    with caplog.at_level(logging.WARNING, logger="streamvoice.engine"):
        fallback = KokoroEngine(ModelFiles(model=path, voices=kokoro_dir / "voices-v1.0.bin"))
    assert not fallback.streams_in_piece
    assert any("in-piece streaming is off" in r.message for r in caplog.records)
    piece = fallback.planner.plan("Hello there.", "en-us")[0]
    chunks = list(fallback.stream_piece(piece, fallback.parse_voice("af_heart"), 1.0))
    assert len(chunks) == 1 and chunks[0].size == len(piece.tokens) + 2


def test_a_stopped_run_ends_the_model_call_in_flight(engine: KokoroEngine) -> None:
    """What a barge-in does to the window in flight (``RunStop``): the model run ends instead of running to
    its end for nobody. Stopped before the piece starts, its first model call is refused by ONNX Runtime,
    which checks the flag between kernels; the same engine then speaks the next piece as usual. How much
    sooner the next answer starts: ``python -m streamvoice.bench.barge_in``."""
    from streamvoice.engine.graphs import RunStop

    piece = engine.planner.plan("The decoder window in flight is stopped for nobody.", "en-us")[0]
    voice = engine.parse_voice("af_heart")
    stop = RunStop()
    stop.stop()
    with engine.interruptible(stop), pytest.raises(Exception, match=r"(?i)terminat"):
        list(engine.stream_piece(piece, voice, 1.0))
    assert sum(w.size for w in engine.stream_piece(piece, voice, 1.0)) > 24_000
