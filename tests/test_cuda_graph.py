"""The decoder as the CUDA provider runs it (``engine.cuda_graph``): the STFT as convolutions is the same
spectrum, and Kokoro's decoder rewritten so makes the same window of speech. Run on the CPU: the rewrite's
speed on a GPU is ``python -m streamvoice.bench.gpu``'s."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from streamvoice.bench.quality import pesq_score
from streamvoice.engine import KokoroEngine
from streamvoice.engine.static_int8.static_decoder import CALIBRATION
from streamvoice.engine.streaming.voice_stats_cache import prepare
from streamvoice.engine.surgery import cuda_graph
from streamvoice.engine.surgery.cuda_graph import stft_as_conv
from streamvoice.engine.surgery.graph_split import split_model


def _session(model: bytes) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


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
    """Same real and imaginary parts as ONNX Runtime's STFT; where the DFT's imaginary part is exactly zero
    (bins 0 and n/2) a residue far below any signal, with the sign ONNX Runtime's STFT mostly leaves there
    (``atan2`` spelled with ``Greater`` turns that sign into the phase's +pi or -pi)."""
    model = _stft_graph()
    signal = {"signal": np.random.default_rng(0).standard_normal((1, 400)).astype(np.float32)}
    re, im = _session(model.SerializeToString()).run(None, signal)
    fused = onnx.ModelProto()
    fused.CopyFrom(model)
    assert stft_as_conv(fused) == 1
    assert [n.op_type for n in fused.graph.node] == ["Reshape", "Conv", "Conv"]
    re2, im2 = _session(fused.SerializeToString()).run(None, signal)
    assert re2.shape == re.shape and im2.shape == im.shape
    np.testing.assert_allclose(re2, re, atol=2e-5)
    np.testing.assert_allclose(im2, im, atol=2e-5)
    assert (im2[:, 0] > 0).all() and (im2[:, 10] < 0).all() and (np.abs(im2[:, [0, 10]]) < 1e-20).all()


def test_kokoros_decoder_for_cuda_has_no_stft_and_makes_the_same_window(engine: KokoroEngine) -> None:
    """Nothing is left for the CPU mid-window, and a real window sounds as before: PESQ 4.2-4.5 against the
    exported decoder (4.5-4.6 for the float decoder a GPU runs; 4.64 is identical audio), where exact zeros
    at bins 0 and n/2 instead of the signed residue score 2.4-3.4, so the bound tells them apart."""
    decoder = split_model(engine.files.model).decoder
    rewritten = cuda_graph.for_cuda(decoder)
    ops = [n.op_type for n in onnx.load_from_string(rewritten).graph.node]
    assert (
        "Atan" not in ops
        and "STFT" not in ops
        and "STFT" in [n.op_type for n in onnx.load_from_string(decoder).graph.node]
    )
    before, after = _session(decoder), _session(rewritten)
    names = [o.name for o in before.get_outputs()]
    # The windows from the voice's statistics as a server starts (the cache), not from what the session's
    # engine learned in the tests before this one: those made the same check score 3.49 in one run's order.
    learned = engine.memory.known()
    prepare(engine)
    try:
        windows = engine.decoder_windows(CALIBRATION[:1], 40, 4)[:2]
    finally:
        for name, (speech, silence) in learned.items():
            engine.set_voice_stats(name, speech, silence)
    for window in windows:
        a, b = before.run(names, window)[0].reshape(-1), after.run(names, window)[0].reshape(-1)
        assert a.shape == b.shape
        assert pesq_score(a, b) >= 4.0


def test_a_graph_without_an_stft_is_left_as_it_is() -> None:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "plain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )  # fmt: skip
    model = helper.make_model(graph).SerializeToString()
    assert cuda_graph.for_cuda(model) is model


def test_the_arctangent_as_a_polynomial_is_atan_over_the_reals() -> None:
    """Within 2e-7 of numpy's arctan (float32 steps near pi / 2 are 1.2e-7) from 1e-30 to 1e30 and at +-inf,
    the sign of a residue kept (the phase reads it), and no ``Atan`` left for the CPU."""
    graph = helper.make_graph(
        [helper.make_node("Atan", ["x"], ["y"], name="Atan")], "atan",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert cuda_graph.atan_as_polynomial(model) == 1
    assert "Atan" not in [n.op_type for n in model.graph.node]
    magnitudes = np.concatenate([np.logspace(-30, 30, 20001), np.linspace(0, 4, 40001)])
    x = np.concatenate([magnitudes, -magnitudes, [np.inf, -np.inf]]).astype(np.float32)
    (y,) = _session(model.SerializeToString()).run(None, {"x": x})
    assert np.max(np.abs(y - np.arctan(x.astype(np.float64)))) < 2e-7
    assert np.array_equal(np.sign(y), np.sign(x))
