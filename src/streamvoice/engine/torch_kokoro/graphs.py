"""CUDA graphs: each (batch, token bucket, frame bucket) of the two halves captured once and replayed.

A replay launches the whole half as one graph (the ONNX path launched ~1,900 nodes one by one per decoder
call). Inputs are copied into the graph's static buffers, so a call is one packed copy in and one out. Batch
sizes are bucketed too; a short batch is filled with copies of its first row, whose outputs are dropped.
Capture needs every captured op to keep its shapes and never read back to the host: the halves are checked
for that on the CPU by ``tests_torch/test_graph_safety.py``; capture itself needs a GPU (``bench.gpu_torch``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from streamvoice.engine.torch_kokoro.decoder import SAMPLES_PER_FRAME
from streamvoice.engine.torch_kokoro.model import (
    FRAME_BUCKETS,
    TOKEN_BUCKETS,
    Kokoro,
    Row,
    Runner,
    Spoken,
    bucket,
)

BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)


class Captured:
    """One function captured as a CUDA graph over static input buffers."""

    def __init__(self, fn: Callable[..., Any], example: Sequence[Tensor], pool: Any = None) -> None:
        self.inputs = [x.clone() for x in example]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the capture: cuDNN's algorithm choice, the allocator
            for _ in range(2):
                fn(*self.inputs)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=pool):
            self.outputs = fn(*self.inputs)

    def __call__(self, *inputs: Tensor) -> Any:
        for static, given in zip(self.inputs, inputs, strict=True):
            static.copy_(given, non_blocking=True)
        self.graph.replay()
        return self.outputs


class GraphRunner(Runner):
    """``Runner`` on CUDA with every shape it meets captured (``warm`` captures them ahead, at start-up)."""

    def __init__(
        self,
        model: Kokoro,
        token_buckets: Sequence[int] | None = None,
        frame_buckets: Sequence[int] | None = None,
        batch_buckets: Sequence[int] = BATCH_BUCKETS,
        capture: Callable[..., Any] = Captured,
    ) -> None:
        """``capture(fn, example_inputs, pool)`` makes a replayable call (``Captured``; a test passes an eager
        stand-in to check on a CPU everything around the capture: buckets, filling, caching, cutting back)."""
        super().__init__(model, token_buckets or TOKEN_BUCKETS, frame_buckets or FRAME_BUCKETS)
        self.batch_buckets = tuple(batch_buckets)
        self.capture = capture
        self.pool = torch.cuda.graph_pool_handle() if capture is Captured else None
        self.fronts: dict[tuple[int, int], Any] = {}
        self.backs: dict[tuple[int, int, int], Any] = {}

    def _front(self, tokens: Tensor, lengths: Tensor, style: Tensor, speed: Tensor) -> tuple[Tensor, Tensor]:
        key = (tokens.shape[0], tokens.shape[1])
        if key not in self.fronts:
            self.fronts[key] = self.capture(
                self.model.front.durations, (tokens, lengths, style, speed), self.pool
            )
        durations, d = self.fronts[key](tokens, lengths, style, speed)
        return durations, d

    def _back(self, frame_count: int, *inputs: Tensor) -> Tensor:
        tokens = inputs[0]
        key = (tokens.shape[0], tokens.shape[1], frame_count)
        if key not in self.backs:

            def back(
                tokens: Tensor, lengths: Tensor, style: Tensor, durations: Tensor, d: Tensor, frames: Tensor
            ) -> Tensor:
                features = self.model.front.features(tokens, lengths, style, durations, d, frame_count)
                return self.model.decoder(*features, style, frames)

            self.backs[key] = self.capture(back, inputs, self.pool)
        audio: Tensor = self.backs[key](*inputs)
        return audio

    @torch.inference_mode()
    def speak(self, rows: Sequence[Row]) -> list[Spoken]:
        n = len(rows)
        filled = list(rows) + [rows[0]] * (bucket(n, self.batch_buckets) - n)
        tokens, lengths, style, speed = self.inputs(filled)
        durations, d = self._front(tokens, lengths, style, speed)
        counts = durations.to(torch.int64).cpu().numpy()  # the one read-back between the halves
        frames = counts.sum(-1)
        frame_count = bucket(int(frames.max()), self.frame_buckets)
        frames_t = torch.from_numpy(frames).to(self.device, non_blocking=True)
        audio = self._back(frame_count, tokens, lengths, style, durations.clone(), d.clone(), frames_t)
        out = audio.cpu().numpy()
        return [
            Spoken(np.array(out[i, : int(frames[i]) * SAMPLES_PER_FRAME]), counts[i, : len(r.tokens)])
            for i, r in enumerate(rows)
        ]

    def warm(self, rows: Sequence[Row], batches: Sequence[int] | None = None) -> int:
        """Capture now, not on a listener's first call: each batch size of each of these rows alone, which
        covers every (token bucket, frame bucket) a mix of them can need (a mix's buckets are its longest
        row's). Returns the graphs held."""
        for b in batches or self.batch_buckets:
            for row in rows:
                self.speak([row] * b)
        return len(self.fronts) + len(self.backs)
