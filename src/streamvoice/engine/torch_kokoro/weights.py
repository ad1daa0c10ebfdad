"""The official ONNX file's weights as this package's state dict.

The exported graph keeps module paths: float parameters by name (``decoder.decoder.generator.ups.0.bias``),
and every weight by the node that consumes it (``/decoder/decoder/decode.0/conv1/Conv_quant``). The int8
file's weights are dequantized first (``static_decoder.float_weights``, ``float_lstms``): the same numbers
the CPU engine's float graph runs. Weight norm is already folded. ALBERT's shared layer appears twelve times
(``query_1`` ... ``query_11``); its first use is kept. ONNX orders LSTM gates i, o, f, c and PyTorch i, f, g, o.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

RENAMES = (
    (r"^encoder\.bert\.encoder\.albert_layer_groups\.0\.albert_layers\.0\.", "front.bert.layer."),
    (r"^(front\.bert\.layer\.(?:attention\.)?(?:query|key|value|dense|ffn_output|ffn))_\d+", r"\1"),
    (r"^encoder\.bert\.encoder\.embedding_hidden_mapping_in", "front.bert.mapping_in"),
    (r"^encoder\.text_encoder\.cnn\.(\d)\.cnn\.\d\.0", r"front.text_encoder.cnn.\1.conv"),
    (r"^encoder\.text_encoder\.cnn\.(\d)\.1\.", r"front.text_encoder.cnn.\1.norm."),
    (r"\.asr_res\.asr_res\.0$", ".asr_res"),
    (r"^encoder\.predictor\.duration_proj\.linear_layer", "front.predictor.duration_proj"),
    (r"^encoder\.(shared|F0|N|F0_proj|N_proj)\b", r"front.predictor.\1"),
    (r"^encoder\.", "front."),
    (r"^decoder\.decoder\.generator\.m_source\.", "decoder.generator."),
    (r"^decoder\.decoder\.generator\.stft\.istft\.stft\.", "decoder.generator."),
    (r"^decoder\.decoder\.", "decoder."),
)
OP = re.compile(r"^(Conv|ConvTranspose|MatMul|Gemm|LSTM|Gather|Mul|Add)(_\w+)?$|^float$")


def module_path(name: str) -> str:
    """A node or initializer name as this package's parameter path (without the last ``.weight``)."""
    parts = name.strip("/").replace("/", ".").split(".")
    while parts and OP.match(parts[-1]):
        parts.pop()
    path = ".".join(parts)
    path = re.sub(r"\.fc\.Gemm_MatMul_quant", ".fc", path)
    for pattern, replacement in RENAMES:
        path = re.sub(pattern, replacement, path)
    return path


def renamed(name: str) -> str:
    """An initializer's dotted name as this package's state-dict key."""
    for pattern, replacement in RENAMES:
        name = re.sub(pattern, replacement, name)
    return name


def lstm_gates(w: NDArray[np.float32]) -> NDArray[np.float32]:
    """Rows in ONNX's gate order (i, o, f, c) to PyTorch's (i, f, g, o)."""
    i, o, f, c = np.split(w, 4, axis=0)
    return np.concatenate([i, f, c, o], axis=0)


def float_model(model_path: Path) -> Any:
    """The ONNX file with its int8 weights dequantized: the float graph ONNX Runtime's float path runs."""
    import onnx

    from streamvoice.engine.static_int8.static_decoder import float_lstms, float_weights

    model = onnx.load(str(model_path))
    float_weights(model)
    float_lstms(model)
    return model


def onnx_state(model: Any) -> dict[str, NDArray[np.float32]]:
    """Every parameter of ``model.Kokoro`` from a float graph (``float_model``), by its state-dict key."""
    from onnx import numpy_helper

    graph = model.graph
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    consumers: dict[str, list[Any]] = {}
    for n in graph.node:
        for name in n.input:
            consumers.setdefault(name, []).append(n)
    state: dict[str, NDArray[np.float32]] = {}

    def put(key: str, value: NDArray[Any]) -> None:
        state.setdefault(key, np.ascontiguousarray(value, dtype=np.float32))

    for name, value in inits.items():  # float parameters kept by name: biases, norms, snakes, the iSTFT
        if re.match(r"^(encoder|decoder)\.", name) and not name.endswith(
            ("_quantized", "_scale", "_zero_point")
        ):
            put(renamed(name), value)
    for n in graph.node:
        path = module_path(n.name)
        if n.op_type in ("Conv", "ConvTranspose") and n.input[1] in inits:
            put(path + ".weight", inits[n.input[1]])
            if len(n.input) > 2 and n.input[2] in inits:
                put(path + ".bias", inits[n.input[2]])
        elif n.op_type == "MatMul" and n.input[1] in inits:
            weight = inits[n.input[1]]
            if path.endswith("generator"):  # the source's 9 -> 1 merge is a bare MatMul
                path += ".l_linear"
            put(path + ".weight", weight.T)
            for add in consumers.get(n.output[0], []):
                bias = [i for i in add.input if i in inits and i != n.input[1]]
                if add.op_type == "Add" and bias:
                    put(path + ".bias", inits[bias[0]])
        elif n.op_type == "LSTM":
            w, r, b = (inits[i] for i in n.input[1:4])
            hidden = r.shape[-1]
            for direction, half in enumerate(("forward_lstm", "backward_lstm")):
                put(f"{path}.{half}.weight_ih_l0", lstm_gates(w[direction]))
                put(f"{path}.{half}.weight_hh_l0", lstm_gates(r[direction]))
                put(f"{path}.{half}.bias_ih_l0", lstm_gates(b[direction][: 4 * hidden]))
                put(f"{path}.{half}.bias_hh_l0", lstm_gates(b[direction][4 * hidden :]))
        elif n.op_type == "Gather" and n.input[0].endswith("_quantized") and n.input[0] in inits:
            (dequantize,) = (c for c in consumers[n.output[0]] if c.op_type == "DequantizeLinear")
            _, scale, zero = dequantize.input
            table = (inits[n.input[0]].astype(np.float32) - inits[zero].astype(np.float32)) * inits[scale]
            put(path + ".weight", table)
    return state


def load(module: Any, model: Path | Any) -> None:
    """Fill ``module`` (a ``model.Kokoro``) from the ONNX file or its float graph; every parameter must be
    found."""
    import torch

    state = onnx_state(float_model(model) if isinstance(model, Path) else model)
    expected = module.state_dict()
    missing = sorted(set(expected) - set(state))
    if missing:
        raise ValueError(f"{len(missing)} parameters not found in the model file: {missing[:8]}")
    module.load_state_dict(
        {k: torch.from_numpy(state[k].copy()).reshape(expected[k].shape) for k in expected}
    )
