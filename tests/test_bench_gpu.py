"""``bench.gpu``'s float graph: the int8 file's quantized LSTMs (a CPU-only contrib operator) as plain
``LSTM`` nodes on their dequantized weights compute what they computed, up to the quantized op's rounding of
its activations. On a small random LSTM, so a wrong layout (the contrib op stores weights transposed) fails."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from streamvoice.engine.static_int8.static_decoder import float_lstms


def _quantized_lstm(rng: np.random.Generator, inputs: int = 8, hidden: int = 4) -> tuple[bytes, Any]:
    # Weights in -64..64, as the int8 file stores them (its quantizer's reduced range): with the full -127..127
    # the quantized op's own u8s8 products saturate on a CPU without VNNI (0.034 on average on an AVX2 EPYC),
    # so the reference drifts, not the conversion.
    w = rng.integers(-64, 65, (2, inputs, 4 * hidden)).astype(np.int8)
    r = rng.integers(-64, 65, (2, hidden, 4 * hidden)).astype(np.int8)
    constants = [
        numpy_helper.from_array(w, "W"),
        numpy_helper.from_array(r, "R"),
        numpy_helper.from_array(rng.standard_normal((2, 8 * hidden)).astype(np.float32) * 0.1, "B"),
        numpy_helper.from_array(np.array([0.01, 0.02], np.float32), "W_scale"),
        numpy_helper.from_array(np.array([3, -2], np.int8), "W_zero"),
        numpy_helper.from_array(np.array([0.02, 0.01], np.float32), "R_scale"),
        numpy_helper.from_array(np.array([-1, 4], np.int8), "R_zero"),
    ]
    node = helper.make_node(
        "DynamicQuantizeLSTM",
        ["x", "W", "R", "B", "", "", "", "", "W_scale", "W_zero", "R_scale", "R_zero"],
        ["y"],
        domain="com.microsoft",
        direction="bidirectional",
        hidden_size=hidden,
    )
    graph = helper.make_graph(
        [node], "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 1, inputs])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], constants,
    )  # fmt: skip
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    return model.SerializeToString(), model


def _run(model: bytes, x: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {"x": x})[0])


def test_quantized_lstms_become_float_lstms_computing_the_same() -> None:
    rng = np.random.default_rng(0)
    data, model = _quantized_lstm(rng)
    x = rng.standard_normal((12, 1, 8)).astype(np.float32)
    before = _run(data, x)
    assert float_lstms(model) == 1
    assert [n.op_type for n in model.graph.node] == ["LSTM"]
    assert {i.name for i in model.graph.initializer} == {"B", "/float_W", "/float_R"}
    after = _run(model.SerializeToString(), x)
    assert after.shape == before.shape == (12, 2, 1, 4)
    # 0.002 on average and 0.013 at most here; the same conversion ignoring the zero points: 0.015 and 0.085
    difference = np.abs(after - before)
    assert difference.mean() < 0.01 and difference.max() < 0.1 < np.abs(before).max()
