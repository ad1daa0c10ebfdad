"""The PyTorch Kokoro behind the engine's seam (``graphs.Graph``): every piece whole, batched across listeners.

On a GPU a whole piece costs a few milliseconds inside a batch, so pieces are not windowed: a listener hears
the whole piece's sound (the reference the CPU's windows are judged against), and the chunker's short first
piece keeps onset short. Model workers hand their pieces to one ``GpuScheduler``; it runs them in batches,
earliest deadline first, on captured CUDA graphs (``graphs.GraphRunner``).
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from streamvoice.engine.graphs import Decoded, Decoding, Inputs, RunStop
from streamvoice.engine.torch_kokoro.decoder import SAMPLES_PER_FRAME
from streamvoice.engine.torch_kokoro.model import TOKEN_BUCKETS, Kokoro, Row, Runner, Spoken
from streamvoice.engine.torch_kokoro.scheduler import GpuScheduler

MAX_ROWS = 32  # rows per GPU call: mstar's cap is batch x frames <= 16,384 at its largest frame bucket


def available() -> bool:
    """Whether this machine has a CUDA GPU PyTorch can use."""
    return bool(torch.cuda.is_available())


class TorchGraph:
    windows = False

    def __init__(self, model_path: Path, device: str | None = None, max_rows: int = MAX_ROWS) -> None:
        self.device = device or ("cuda" if available() else "cpu")
        model = Kokoro.from_onnx(model_path, self.device)
        if self.device.startswith("cuda"):
            from streamvoice.engine.torch_kokoro.graphs import GraphRunner

            self.runner: Runner = GraphRunner(model)
        else:
            self.runner = Runner(model)
        self.inputs = Inputs("tokens", np.float32)
        self.calls = 0
        self.rows = 0
        self.scheduler: GpuScheduler[Row, Spoken] = GpuScheduler(
            self.runner.speak, max_rows, TOKEN_BUCKETS, self._counted
        )

    def _counted(self, rows: int) -> None:
        self.calls += 1
        self.rows += rows

    def decode_piece(
        self, feeds: dict[str, NDArray[Any]], style: NDArray[np.float32], how: Decoding
    ) -> Decoded:
        tokens = feeds[self.inputs.tokens][0].tolist()
        row = Row(tokens, style.reshape(-1).astype(np.float32), float(feeds["speed"][0]))
        deadline = time.monotonic() if how.deadline is None else how.deadline
        spoken = self.scheduler.speak(row, len(tokens), deadline)
        frames = len(spoken.audio) // SAMPLES_PER_FRAME
        return Decoded(iter([(spoken.audio, True)]), 0, frames, spoken.durations)

    def interruptible(self, stop: RunStop) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # a piece is one batched call of a few milliseconds

    def close(self) -> None:
        self.scheduler.close()
