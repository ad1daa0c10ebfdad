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

import torch
from torch import Tensor

from streamvoice.engine.torch_kokoro.model import (
    FRAME_BUCKETS,
    TOKEN_BUCKETS,
    Kokoro,
    Row,
    Runner,
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

    def batch(self, rows: Sequence[Row]) -> Sequence[Row]:
        return [*rows, *[rows[0]] * (bucket(len(rows), self.batch_buckets) - len(rows))]

    def front(self, tokens: Tensor, lengths: Tensor, style: Tensor, speed: Tensor) -> tuple[Tensor, Tensor]:
        key = (tokens.shape[0], tokens.shape[1])
        if key not in self.fronts:
            self.fronts[key] = self.capture(super().front, (tokens, lengths, style, speed), self.pool)
        durations, d = self.fronts[key](tokens, lengths, style, speed)
        return durations, d

    def back(self, frame_count: int, *inputs: Tensor) -> Tensor:
        key = (inputs[0].shape[0], inputs[0].shape[1], frame_count)
        if key not in self.backs:

            def back(*captured: Tensor) -> Tensor:
                return Runner.back(self, frame_count, *captured)

            self.backs[key] = self.capture(back, inputs, self.pool)
        audio: Tensor = self.backs[key](*inputs)
        return audio

    def warm(self, rows: Sequence[Row], batches: Sequence[int] | None = None) -> int:
        """Capture now, not on a listener's first call: each batch size of each of these rows alone, which
        covers every (token bucket, frame bucket) a mix of them can need (a mix's buckets are its longest
        row's). Returns the graphs held."""
        for b in batches or self.batch_buckets:
            for row in rows:
                self.speak([row] * b)
        return len(self.fronts) + len(self.backs)
