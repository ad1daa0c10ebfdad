"""The PyTorch engine's tests run in their own environment (``make test-torch``: ``requirements-torch.lock``;
PyTorch is ~5 GB, which the main environment does not carry). They compare it with ONNX Runtime on the same
weights: the int8 file with its weights dequantized (``static_decoder.float_weights`` / ``float_lstms``), the
graph the CPU engine's float path runs, with the front's outputs exposed."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kokoro_onnx.tokenizer import Tokenizer  # noqa: E402

from streamvoice.engine.static_int8.static_decoder import CALIBRATION  # noqa: E402
from streamvoice.engine.torch_kokoro.model import Kokoro, Row  # noqa: E402
from streamvoice.model_files import resolve_model_files  # noqa: E402


@dataclass(frozen=True)
class Said:
    voice: str
    row: Row


# One thread: `make test` runs this beside the main suite's three workers on the same cores, where PyTorch's
# and ONNX Runtime's spinning pools would fight each other (a clean-clone run beside a busy core: the batching
# test took 65 s with a pool of two, 9 s alone).
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def model_path() -> Path:
    return resolve_model_files(os.environ.get("KOKORO_MODEL_DIR")).model


@pytest.fixture(scope="session")
def float_graph(model_path: Path) -> Any:
    """The int8 file dequantized once, for both sides of every comparison."""
    from streamvoice.engine.torch_kokoro.weights import float_model

    return float_model(model_path)


@pytest.fixture(scope="session")
def kokoro(float_graph: Any) -> Kokoro:
    return Kokoro.from_onnx(float_graph)


@pytest.fixture(scope="session")
def said(model_path: Path) -> list[Said]:
    """CALIBRATION's sentences, one per language (nine; its second English voice left out), as model rows."""
    packs = np.load(model_path.with_name("voices-v1.0.bin"))
    tokenizer = Tokenizer()
    out = []
    for voice, phonemes in [c for c in CALIBRATION if c[0] != "am_michael"]:
        tokens = tokenizer.tokenize(phonemes)
        style = packs[voice][len(tokens) - 1].reshape(-1).astype(np.float32)
        out.append(Said(voice, Row([0, *tokens, 0], style)))
    return out


class Reference:
    """ONNX Runtime on the dequantized float graph, with durations and the decoder's inputs as outputs."""

    def __init__(self, float_graph: Any, folder: Path) -> None:
        import onnx
        import onnxruntime as ort

        from streamvoice.engine.surgery.graph_split import find_boundary

        model = onnx.ModelProto()
        model.CopyFrom(float_graph)
        self.boundary = find_boundary(model.graph)
        for name in [self.boundary.durations, *self.boundary.names]:
            kind = onnx.TensorProto.INT64 if name == self.boundary.durations else onnx.TensorProto.FLOAT
            model.graph.output.append(onnx.helper.make_tensor_value_info(name, kind, None))
        path = folder / "float.onnx"
        onnx.save(model, str(path))
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.names = [o.name for o in self.session.get_outputs()]

    def run(self, row: Row) -> dict[str, Any]:
        feeds = {
            "tokens": np.array([list(row.tokens)], dtype=np.int64),
            "style": row.style.reshape(1, -1),
            "speed": np.array([row.speed], dtype=np.float32),
        }
        return dict(zip(self.names, self.session.run(None, feeds), strict=True))


@pytest.fixture(scope="session")
def reference(float_graph: Any) -> Iterator[Reference]:
    with tempfile.TemporaryDirectory() as folder:
        yield Reference(float_graph, Path(folder))
