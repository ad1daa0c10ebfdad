"""Prior-blended instance norms: the arithmetic, the graph rewrite on a small graph, and on Kokoro's decoder."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from streamvoice.bench.spectral import log_spectral_distance
from streamvoice.engine import KokoroEngine
from streamvoice.engine.surgery.norm_stats import (
    BLEND_PRIOR,
    BLEND_WINDOW,
    NormStats,
    add_prior_inputs,
    find_norms,
)

EPS = 1e-5


def stats_of(x: NDArray[np.float64]) -> NormStats:
    return NormStats((x.mean(axis=-1),), (x.var(axis=-1),), float(x.shape[-1]))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 50), st.integers(1, 50), st.integers(0, 2**31 - 1))
def test_merge_is_the_statistics_of_the_union(n1: int, n2: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.normal(rng.normal(size=(3, 1)) * 5, 2.0, size=(3, n1))
    b = rng.normal(rng.normal(size=(3, 1)) * 5, 0.5, size=(3, n2))
    merged = NormStats.merge(stats_of(a), stats_of(b))
    union = stats_of(np.concatenate([a, b], axis=-1))
    assert merged is not None and merged.frames == n1 + n2
    np.testing.assert_allclose(merged.means[0], union.means[0], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(merged.variances[0], union.variances[0], rtol=1e-9, atol=1e-9)
    only_a = stats_of(a)
    assert NormStats.merge(None, only_a) is only_a
    assert NormStats.merge(only_a, None) is only_a


def instance_norm_model() -> Any:
    """x [1, C, T] -> (x - mean_T) / sqrt(var_T + eps) * 2, written the way torch exports it."""
    import onnx
    from onnx import TensorProto, helper

    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [2])
    eps = helper.make_tensor("eps", TensorProto.FLOAT, [], [EPS])
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    nodes = [
        helper.make_node("ReduceMean", ["x", "axes"], ["m"], name="norm/ReduceMean"),
        helper.make_node("Sub", ["x", "m"], ["d"], name="norm/Sub"),
        helper.make_node("Mul", ["d", "d"], ["d2"], name="norm/Mul_2"),
        helper.make_node("ReduceMean", ["d2", "axes"], ["v"], name="norm/ReduceMean_2"),
        helper.make_node("Add", ["v", "eps"], ["ve"], name="norm/Add"),
        helper.make_node("Sqrt", ["ve"], ["s"], name="norm/Sqrt"),
        helper.make_node("Div", ["d", "s"], ["n"], name="norm/Div"),
        helper.make_node("Mul", ["n", "two"], ["y"], name="out"),
    ]
    graph = helper.make_graph(
        nodes,
        "instance-norm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, None])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, None])],
        initializer=[axes, eps, two],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    return model


def run(model: Any, feeds: dict[str, NDArray[Any]]) -> list[NDArray[Any]]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return [np.asarray(o) for o in session.run(None, feeds)]


def test_rewritten_norm_blends_prior_and_window_statistics() -> None:
    model = instance_norm_model()
    norms = find_norms(model.graph)
    assert [(n.x, n.mean, n.var) for n in norms] == [("x", "m", "v")]
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 2.0, size=(1, 4, 50)).astype(np.float32)
    (original,) = run(model, {"x": x})
    add_prior_inputs(model, norms)
    pm = rng.normal(size=(1, 4, 1)).astype(np.float32)
    pv = rng.uniform(0.5, 2.0, size=(1, 4, 1)).astype(np.float32)

    def blended(a: float) -> list[NDArray[Any]]:
        return run(
            model,
            {
                "x": x,
                "norm_stats.0.prior_mean": pm,
                "norm_stats.0.prior_var": pv,
                BLEND_PRIOR: np.array([a], np.float32),
                BLEND_WINDOW: np.array([1.0 - a], np.float32),
            },
        )

    # Weight 0 on the prior: exactly the original norm; the window's statistics come back out.
    y, wm, wv = blended(0.0)
    np.testing.assert_allclose(y, original, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(wm, x.mean(axis=2, keepdims=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(wv, x.var(axis=2, keepdims=True), rtol=1e-4, atol=1e-4)
    # Weight 1: the prior alone.
    y, _, _ = blended(1.0)
    np.testing.assert_allclose(y, (x - pm) / np.sqrt(pv + EPS) * 2, rtol=1e-4, atol=1e-4)
    # In between: the statistics of the union of the two sets.
    y, _, _ = blended(0.25)
    union = NormStats.merge(
        NormStats((pm.astype(np.float64),), (pv.astype(np.float64),), 1.0),
        NormStats((x.mean(axis=2, keepdims=True).astype(np.float64),), (x.var(axis=2, keepdims=True),), 3.0),
    )
    assert union is not None
    expected = (x - union.means[0]) / np.sqrt(union.variances[0] + EPS) * 2
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)


def test_a_graph_without_norms_is_left_alone() -> None:
    model = instance_norm_model()
    for node in model.graph.node:
        if node.op_type == "ReduceMean":
            node.op_type = "ReduceMax"  # no longer a mean: not an instance norm
    assert find_norms(model.graph) == []
    before = model.SerializeToString()
    add_prior_inputs(model, [])
    assert model.SerializeToString() == before


def test_kokoro_decoder_has_all_its_norms_rewritten(engine: KokoroEngine) -> None:
    split = engine.split
    assert split is not None
    assert split.norms == 54  # encode + 4 decode blocks (2 each), 6 resblocks x 6, 2 noise blocks x 6


def test_whole_piece_statistics_make_windows_match_whole_piece_audio(engine: KokoroEngine) -> None:
    """With the piece's own statistics as the prior for what is not decoded yet, windows come closer."""
    split = engine.split
    assert split is not None
    spec = engine.parse_voice("af_heart")
    piece = engine.planner.plan("The museum opens at nine, and tours start every half hour.", "en-us")[0]
    pack = engine.style_pack(spec)
    feeds, style = engine.feeds(piece.tokens, pack, 1.0)
    feats = split.features(feeds)
    whole, stats = split.whole(feats, style)
    oracle = np.concatenate(
        [a for a, _ in split.stream(feats, style, engine.window_plan, stats.weighted(10_000.0))]
    )
    cold = np.concatenate([a for a, _ in split.stream(feats, style, engine.window_plan, None)])
    assert oracle.size == cold.size == whole.size
    # 5.6 dB with the decoder as exported, 6.6 with the static-int8 decoder (the default on a CPU)
    assert log_spectral_distance(oracle, whole) < 7.0
    assert log_spectral_distance(oracle, whole) < log_spectral_distance(cold, whole) - 0.5


@pytest.mark.parametrize("voice", ["af_heart", "am_adam"])
def test_engine_learns_a_voice_and_streams_it_warm(engine: KokoroEngine, voice: str) -> None:
    spec = engine.parse_voice(voice)
    engine.set_voice_stats(spec.text, None, None)
    piece = engine.planner.plan("Please bring your passport, or you cannot board the plane.", "en-us")[0]
    whole = engine.synthesize_piece(piece, spec, 1.0, trim=False, learn=False)  # learns nothing
    assert engine.voice_stats(spec.text) is None
    # the bare model's windows, silences and all (the trimmed path is compared in test_listener)
    cold = np.concatenate(list(engine.stream_piece(piece, spec, 1.0, trim=False)))
    learned = engine.voice_stats(spec.text)
    assert learned is not None and learned.frames == whole.size // 600
    engine.set_voice_stats(spec.text, None, None)
    assert engine.calibrate(voice) is not None  # what the statistics cache holds for every stock voice
    prior = engine.voice_stats(spec.text)
    assert prior is not None and prior.frames > 20
    warm = np.concatenate(list(engine.stream_piece(piece, spec, 1.0, trim=False)))
    assert warm.size == cold.size == whole.size
    assert log_spectral_distance(warm, whole) < 7.5
    assert log_spectral_distance(warm, whole) < log_spectral_distance(cold, whole)
    # The prior follows the voice: a new piece moves it, and old history counts for a bounded weight.
    after = engine.voice_stats(spec.text)
    assert after is not None and after.frames > prior.frames
