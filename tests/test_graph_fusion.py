"""The decoder's elementwise rewrites (``engine.graph_fusion``): each applies to Kokoro's decoder, and the
graph computes what it computed before. Their speed is ``python -m streamvoice.bench.engine``'s."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from streamvoice.engine import KokoroEngine
from streamvoice.engine.static_int8.static_decoder import CALIBRATION, float_weights
from streamvoice.engine.surgery import graph_fusion
from streamvoice.engine.surgery.graph_split import split_model


def _session(model: Any) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def test_a_rewrite_leaves_what_it_does_not_match() -> None:
    """A ``Sub`` that is not a norm's blended mean, and a ``Pow`` that is not a square, stay as they are."""
    nodes = [
        helper.make_node("Sub", ["x", "m"], ["d"]),
        helper.make_node("Div", ["d", "s"], ["n"]),
        helper.make_node("Pow", ["n", "three"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "plain",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 2, 3]) for name in ("x", "m", "s")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(3.0, np.float32), "three")],
    )  # fmt: skip
    model = helper.make_model(graph)
    assert graph_fusion.fuse(model) == {"norm_affine": 0, "snake": 0, "square": 0}
    assert [n.op_type for n in model.graph.node] == ["Sub", "Div", "Pow"]


@pytest.fixture(scope="module")
def float_decoder(engine: KokoroEngine) -> Any:
    model = onnx.load_from_string(split_model(engine.files.model).decoder)
    float_weights(model)
    return model


def test_the_folds_apply_to_kokoros_decoder_and_compute_the_same_window(
    engine: KokoroEngine, float_decoder: Any
) -> None:
    """Every AdaIN norm but those whose output is read twice is folded, every snake after a folded norm, every
    square; a real window's audio and every statistic are what the graph made before (float rounding and the
    snakes' polynomial apart)."""
    folded = onnx.ModelProto()
    folded.CopyFrom(float_decoder)
    norms = graph_fusion.fold_norm_affine(folded)
    snakes = graph_fusion.fold_snake(folded)
    squares = graph_fusion.square_by_mul(folded)
    assert norms >= 50 and snakes >= 40 and squares >= 1
    assert not any(n.op_type == "Pow" for n in folded.graph.node)
    sines = sum(n.op_type == "Sin" for n in folded.graph.node)
    assert sines == sum(n.op_type == "Sin" for n in float_decoder.graph.node) - snakes  # the source's stay
    whole = onnx.ModelProto()
    whole.CopyFrom(float_decoder)
    assert graph_fusion.fuse(whole) == {"norm_affine": norms, "snake": snakes, "square": squares}

    (window,) = engine.decoder_windows(CALIBRATION[:1], 40, 4)[:1]
    before, after = _session(float_decoder), _session(folded)
    names = [o.name for o in before.get_outputs()]
    for name, a, b in zip(names, before.run(names, window), after.run(names, window), strict=True):
        # Exact but for float rounding and the snakes' polynomial (``SIN2_POLYNOMIAL``): ~1e-5 of full scale.
        np.testing.assert_allclose(b, a, atol=3e-4 * float(np.abs(a).max()) + 1e-6, err_msg=name)
        assert np.sqrt(np.mean((b - a) ** 2)) <= 1e-4 * np.sqrt(np.mean(a**2)) + 1e-9, name


def test_the_snakes_sine_squared_is_its_polynomial_within_its_stated_error() -> None:
    """``sin(pi w)^2 / pi`` as the rewrite computes it, on ``w`` far from zero too (a snake's argument is
    unbounded): within 2.5e-5 / pi of the exact value at every point of a fine grid."""
    w = np.concatenate([np.linspace(-3.0, 3.0, 60001), np.linspace(997.0, 1003.0, 6001)]).astype(np.float32)
    coefficients = [f"c{i}" for i in range(len(graph_fusion.SIN2_POLYNOMIAL))]
    graph = helper.make_graph(
        graph_fusion.sin_squared_terms(coefficients, "w", "s2"), "sin2",
        [helper.make_tensor_value_info("w", TensorProto.FLOAT, [w.size])],
        [helper.make_tensor_value_info("s2", TensorProto.FLOAT, [w.size])],
        [
            numpy_helper.from_array(np.array(k / np.pi, np.float32), name)
            for k, name in zip(graph_fusion.SIN2_POLYNOMIAL, coefficients, strict=True)
        ],
    )  # fmt: skip
    (made,) = _session(helper.make_model(graph)).run(None, {"w": w})
    exact = np.sin(np.pi * w.astype(np.float64)) ** 2 / np.pi
    assert np.abs(made - exact).max() < 2.5e-5 / np.pi + 1e-6
