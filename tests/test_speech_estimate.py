"""A piece's statistics estimated before decoding: the summaries, the fit, the file, the blend of
references, and that a stream normalises every window with the one estimate (issue #66)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from streamvoice.engine import KokoroEngine
from streamvoice.engine.streaming import speech_estimate
from streamvoice.engine.streaming.speech_estimate import (
    Reference,
    SpeechEstimator,
    frame_summaries,
    packed,
)
from streamvoice.engine.surgery.norm_stats import NormStats
from streamvoice.engine.timing import decode_range

SIZES = (3, 2)


def stats(rng: np.random.Generator, frames: float = 10.0) -> NormStats:
    means = tuple(rng.normal(size=(1, s, 1)) for s in SIZES)
    variances = tuple(rng.uniform(0.5, 2.0, size=(1, s, 1)) for s in SIZES)
    return NormStats(means, variances, frames)


def test_summaries_share_out_every_frame() -> None:
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(4, 8))
    asr = np.repeat(centers[[0, 0, 2]].T, 2, axis=1)  # 6 frames: 4 of class 0, 2 of class 2
    f0 = np.array([0, 0, 0, 0, 200, 200, 200, 200, 200, 200, 200, 200.0])  # a third unvoiced
    n = np.linspace(-5, 5, 12)
    s = frame_summaries(asr, f0, n, centers)
    classes = s[-4:]
    np.testing.assert_allclose(classes, [4 / 6, 0, 2 / 6, 0])
    np.testing.assert_allclose(s[:8], asr.mean(1))
    assert s[8] == pytest.approx(2 / 3)  # voiced share
    assert s[9] == pytest.approx(np.log(200))  # voiced frames' log pitch
    pitch_hist, energy_hist = s[14:26], s[26:38]
    assert pitch_hist.sum() == pytest.approx(1) and energy_hist.sum() == pytest.approx(1)


def test_the_fit_recovers_a_low_rank_linear_map_and_keeps_it_through_its_file(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    features, channels = 6, sum(SIZES)
    true = rng.normal(size=(features, 2)) @ rng.normal(size=(2, 2 * channels))  # rank 2
    x = rng.normal(size=(200, features))
    y = x @ true + 0.3
    estimator = speech_estimate.fit(x, y, np.zeros((1, 8)), SIZES, ridge=1e-6, rank=2)
    reference = Reference(stats(rng), np.zeros(features))
    probe = rng.normal(size=features)
    got = packed(estimator.estimate(reference, probe, 25.0))
    want = packed(reference.stats) + probe @ true + 0.3
    np.testing.assert_allclose(got, want, atol=1e-4)  # the basis is applied in float32
    estimator.shares.update(af_bella=0.8, am_adam=1.0)
    estimator.gains.update(af_bella=0.83)
    loaded = SpeechEstimator.load(estimator.save(tmp_path / "e.npz"))
    assert loaded.shares == {"af_bella": 0.8, "am_adam": 1.0}
    assert loaded.share("bf_emma") == speech_estimate.DEFAULT_SHARE  # a voice the fit measured no share for
    assert loaded.gains == {"af_bella": 0.83} and loaded.gain("am_adam") == 1.0
    again = loaded.estimate(reference, probe, 25.0)
    assert again.frames == 25.0
    np.testing.assert_allclose(packed(again), want, atol=2e-2)  # the basis is kept as float16
    assert loaded.digest() == SpeechEstimator.load(tmp_path / "e.npz").digest()


def test_a_blends_reference_weighs_its_parts() -> None:
    rng = np.random.default_rng(2)
    a = Reference(stats(rng), np.zeros(3), share=1.0, gain=0.5)
    b = Reference(stats(rng), np.ones(3), share=0.8, gain=2.0)
    mixed = Reference.mixed([(a, 3.0), (b, 1.0)])
    np.testing.assert_allclose(mixed.summaries, [0.25, 0.25, 0.25])
    assert mixed.share == 0.8  # the part that needs its windows' own statistics still gets them
    assert math.isclose(mixed.gain, 0.5**0.75 * 2.0**0.25)  # the gains' geometric mean, by weight
    want = NormStats.merge(a.stats.weighted(7.5), b.stats.weighted(2.5))
    assert want is not None
    np.testing.assert_allclose(mixed.stats.means[0], want.means[0])
    np.testing.assert_allclose(mixed.stats.variances[1], want.variances[1])


def test_a_model_file_without_a_fit_has_no_estimator(tmp_path: Path) -> None:
    assert speech_estimate.shipped("0" * 64, tmp_path) is None


def test_every_window_normalises_with_the_one_estimate(
    engine: KokoroEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped model file has a fit; with it, a piece's windows all take the same statistics at the
    voice's measured share, and the voice's statistics are left as calibrated."""
    split = engine.split
    assert split is not None and split.estimator is not None, "the official model file ships its fit"
    spec = engine.parse_voice("am_michael")
    reference = engine.memory.reference(spec)
    assert reference is not None, "calibration keeps the reference's summaries"
    assert engine.memory.reference(spec) is reference  # kept, so its packed form is made once
    calibrated = engine.voice_stats("am_michael")
    calls: list[tuple[Any, float]] = []
    decode = split.decode

    def recorded(feats: Any, style: Any, a: int, b: int, prior: Any = None, weight: float = 0.0) -> Any:
        calls.append((prior, weight))
        return decode(feats, style, a, b, prior, weight)

    monkeypatch.setattr(split, "decode", recorded)
    piece = engine.planner.plan("The parcel reached the depot late on Sunday evening.", "en-us")[0]
    audio = np.concatenate(list(engine.stream_piece(piece, spec, 1.0)))
    assert audio.size > 0 and len(calls) > 2
    assert "am_michael" in split.estimator.shares and reference.share == split.estimator.share("am_michael")
    share = reference.share
    assert all(prior is calls[0][0] and weight == share for prior, weight in calls)
    assert engine.voice_stats("am_michael") is calibrated


def test_a_voices_gain_scales_its_stream_and_nothing_else(engine: KokoroEngine) -> None:
    """The gain takes a voice's loudness at its share out (``SpeechEstimator.gains``): the same windows, every
    sample scaled by it."""
    split = engine.split
    assert split is not None
    spec = engine.parse_voice("af_bella")
    reference = engine.memory.reference(spec)
    assert reference is not None
    piece = engine.planner.plan("Two tickets for the late show on Friday, please.", "en-us")[0]
    feeds, style = engine.feeds(piece.tokens, engine.style_pack(spec), 1.0)
    feats = split.features(feeds)
    span = decode_range(split.durations(feats), piece.voiced, split.frames(feats))

    def streamed(gain: float) -> NDArray[np.float32]:
        chunks = split.stream(feats, style, engine.window_plan, None, None, None, None, span,
                              engine.memory.silence(spec), replace(reference, gain=gain))  # fmt: skip
        return np.concatenate([audio for audio, _ in chunks])

    one, half = streamed(1.0), streamed(0.5)
    assert len(one) == len(half) and np.abs(one).max() > 0.01
    np.testing.assert_allclose(half, 0.5 * one, rtol=1e-5, atol=1e-7)


def test_the_first_norms_first_channels_are_the_aligned_text_features(engine: KokoroEngine) -> None:
    """What ``with_text_statistics`` relies on: decoded, the first norm's first channels have the statistics
    of the front's aligned text features (within the static-int8 decoder's rounding of its input)."""
    split = engine.split
    assert split is not None
    piece = engine.planner.plan("The parcel reached the depot late on Sunday evening.", "en-us")[0]
    feeds, style = engine.feeds(piece.tokens, engine.style_pack(engine.parse_voice("am_michael")), 1.0)
    feats = split.features(feeds)
    a, b = decode_range(split.durations(feats), piece.voiced, split.frames(feats))
    decoded = split.decode(feats, style, a, b)[1]
    asr = split.tracks(feats, (a, b))[0].astype(np.float64)
    computed = speech_estimate.with_text_statistics(decoded, asr)
    channels = asr.shape[0]
    means, variances = decoded.means[0].reshape(-1)[:channels], decoded.variances[0].reshape(-1)[:channels]
    spread = np.sqrt(asr.var(1))
    live = spread > 1e-3  # a few channels are constant over the piece
    assert np.percentile(np.abs(means - asr.mean(1))[live] / spread[live], 99) < 0.2
    ratio = variances[live] / asr.var(1)[live]
    assert np.percentile(ratio, 1) > 0.8 and np.percentile(ratio, 99) < 1.25
    np.testing.assert_allclose(computed.means[0].reshape(-1)[:channels], asr.mean(1))
    np.testing.assert_array_equal(
        computed.means[0].reshape(-1)[channels:], decoded.means[0].reshape(-1)[channels:]
    )
    assert computed.means[1] is decoded.means[1]


def test_the_short_replies_bench_scores_every_rule_on_the_same_windows(
    engine: KokoroEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``bench.stream_breakdown --short-replies``: each rule's loudness is its share's, times its gain; the
    DNSMOS drop is scored on the gained audio, PESQ on the share's."""
    from streamvoice.bench import stream_breakdown

    monkeypatch.setattr(stream_breakdown, "SHORT_REPLIES", ("Will do.",))
    got = stream_breakdown.short_replies(engine, ["am_puck"])
    (piece,) = got["pieces"]
    assert piece["speech_frames"] < 80  # under 2 s of speech
    reference = engine.memory.reference(engine.parse_voice("am_puck"))
    assert reference is not None and reference.gain != 1.0
    voice_gained, voice_plain = (
        piece[name] for name in ("as shipped: the voice's share and gain", "the voice's share, no gain")
    )
    assert voice_gained[1] == voice_plain[1] and math.isclose(
        voice_gained[0], voice_plain[0] * reference.gain
    )
    assert voice_gained[2] != voice_plain[2]  # DNSMOS hears the level
    assert [row["rule"] for row in got["rows"]] == list(stream_breakdown.REPLY_RULES)


def test_a_voices_reference_is_its_greeting_decoded_whole_and_the_cache_keeps_it(
    engine: KokoroEngine, tmp_path: Path
) -> None:
    """The estimate is of whole pieces, silences and all, so a voice's reference is its greeting decoded
    whole: more frames than its speech, and other statistics. The statistics cache keeps the two apart."""
    from streamvoice.engine.streaming import voice_stats_cache

    name = "bf_emma"
    calibrated = engine.calibrate(name)
    assert calibrated is not None
    speech, silence = calibrated
    reference = engine.memory.stock_reference(name)
    assert reference is not None and silence is not None
    assert reference.stats.frames > speech.frames + silence.frames - 1
    assert not np.allclose(packed(reference.stats), packed(speech))
    path = voice_stats_cache.save(engine, tmp_path / voice_stats_cache.cache_name(engine))
    engine.set_voice_reference(name, None)
    engine.set_voice_stats(name, None, None)
    assert voice_stats_cache.load(engine, path) == len(engine.voice_names)
    again = engine.memory.stock_reference(name)
    assert again is not None and (again.share, again.gain) == (reference.share, reference.gain)
    np.testing.assert_allclose(packed(again.stats), packed(reference.stats))
    np.testing.assert_allclose(again.summaries, reference.summaries)
    speech_again = engine.voice_stats(name)
    assert speech_again is not None
    np.testing.assert_allclose(packed(speech_again), packed(speech))
