"""The decoder's elementwise rewrites (``engine.graph_fusion``): each applies to Kokoro's decoder, and the
graph computes what it computed before. Their speed is ``python -m streamvoice.bench.engine``'s."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from streamvoice.engine import KokoroEngine, graph_fusion
from streamvoice.engine.graph_split import split_model
from streamvoice.engine.static_decoder import CALIBRATION, float_weights


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
    square; a real window's audio and every statistic are what the graph made before (float rounding apart)."""
    folded = onnx.ModelProto()
    folded.CopyFrom(float_decoder)
    norms = graph_fusion.fold_norm_affine(folded)
    snakes = graph_fusion.fold_snake(folded)
    squares = graph_fusion.square_by_mul(folded)
    assert norms >= 50 and snakes >= 40 and squares >= 1
    assert not any(n.op_type == "Pow" for n in folded.graph.node)
    whole = onnx.ModelProto()
    whole.CopyFrom(float_decoder)
    assert graph_fusion.fuse(whole) == {"norm_affine": norms, "snake": snakes, "square": squares}

    (window,) = engine.decoder_windows(CALIBRATION[:1], 40, 4)[:1]
    before, after = _session(float_decoder), _session(folded)
    names = [o.name for o in before.get_outputs()]
    for name, a, b in zip(names, before.run(names, window), after.run(names, window), strict=True):
        np.testing.assert_allclose(b, a, atol=1e-4 * float(np.abs(a).max()) + 1e-6, err_msg=name)
