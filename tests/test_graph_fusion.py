"""The decoder's elementwise rewrites (``engine.graph_fusion``): each applies to Kokoro's decoder, and the
graph computes what it computed before (and the STFT-as-convolution candidate that lost is the same
spectrum). Their speed is ``python -m streamvoice.bench.engine``'s."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from streamvoice.bench.static_int8 import stft_as_conv
from streamvoice.engine import KokoroEngine, graph_fusion
from streamvoice.engine.graph_split import split_model
from streamvoice.engine.static_decoder import CALIBRATION, float_weights


def _session(model: Any) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _stft_graph(n: int = 20, hop: int = 5) -> Any:
    """STFT read as Kokoro's generator reads it: transposed, real and imaginary parts gathered apart."""
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)).astype(np.float32)
    constants = [
        numpy_helper.from_array(np.array(hop, np.int64), "step"),
        numpy_helper.from_array(window, "window"),
        numpy_helper.from_array(np.array(n, np.int64), "length"),
        numpy_helper.from_array(np.array(0, np.int64), "re_index"),
        numpy_helper.from_array(np.array(1, np.int64), "im_index"),
    ]
    nodes = [
        helper.make_node(
            "STFT", ["signal", "step", "window", "length"], ["spectrum"], name="STFT", onesided=1
        ),
        helper.make_node("Transpose", ["spectrum"], ["bins_first"], perm=[0, 2, 1, 3]),
        helper.make_node("Gather", ["bins_first", "re_index"], ["re"], axis=3),
        helper.make_node("Gather", ["bins_first", "im_index"], ["im"], axis=3),
    ]
    graph = helper.make_graph(
        nodes, "stft", [helper.make_tensor_value_info("signal", TensorProto.FLOAT, [1, None])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ("re", "im")], constants,
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_stft_as_a_convolution_is_the_same_spectrum_with_its_residues_signs() -> None:
    """The candidate ``bench.static_int8`` measures (and which lost on sound): same real and imaginary parts as ONNX Runtime's STFT; where the DFT's imaginary part is exactly zero
    (bins 0 and n/2) a residue far below any signal, with the sign ONNX Runtime's STFT mostly leaves there
    (``atan2`` spelled with ``Greater`` turns that sign into the phase's +pi or -pi)."""
    model = _stft_graph()
    signal = {"signal": np.random.default_rng(0).standard_normal((1, 400)).astype(np.float32)}
    re, im = _session(model).run(None, signal)
    fused = onnx.ModelProto()
    fused.CopyFrom(model)
    assert stft_as_conv(fused) == 1
    assert [n.op_type for n in fused.graph.node] == ["Reshape", "Conv", "Conv"]
    re2, im2 = _session(fused).run(None, signal)
    assert re2.shape == re.shape and im2.shape == im.shape
    np.testing.assert_allclose(re2, re, atol=2e-5)
    np.testing.assert_allclose(im2, im, atol=2e-5)
    assert (im2[:, 0] > 0).all() and (im2[:, 10] < 0).all() and (np.abs(im2[:, [0, 10]]) < 1e-20).all()


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
