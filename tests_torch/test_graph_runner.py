"""Everything around the CUDA capture, on the CPU: a batch filled to its bucket with copies of its first row,
each shape captured once and replayed after, static buffers refilled per call, and each row cut back to its
own audio, equal to what the plain runner gives it. The capture itself needs a GPU (``bench.gpu_torch``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from torch import Tensor

from streamvoice.engine.torch_kokoro.graphs import GraphRunner
from streamvoice.engine.torch_kokoro.model import Kokoro, Row, Runner
from tests_torch.conftest import Said

captures: list[tuple[int, ...]] = []


class Eager:
    """A stand-in for ``Captured``: static input buffers refilled per call, the function run as it is."""

    def __init__(self, fn: Callable[..., Any], example: Sequence[Tensor], pool: Any = None) -> None:
        self.fn = fn
        self.inputs = [x.clone() for x in example]
        captures.append(tuple(example[0].shape))

    def __call__(self, *inputs: Tensor) -> Any:
        for static, given in zip(self.inputs, inputs, strict=True):
            static.copy_(given)
        return self.fn(*self.inputs)


def test_the_graph_runner_fills_buckets_captures_once_and_cuts_rows_back(
    kokoro: Kokoro, said: list[Said]
) -> None:
    runner = GraphRunner(kokoro, token_buckets=(64, 128), frame_buckets=(96, 256), capture=Eager)
    rows = [Row([*s.row.tokens[:20], 0], s.row.style) for s in said[:3]]
    first = runner.speak(rows)
    assert [c[0] for c in captures] == [4, 4]  # three rows filled to the batch bucket of four: front, back
    again = runner.speak(list(reversed(rows)))
    assert len(captures) == 2  # the same shapes: replayed, not captured again
    plain = Runner(kokoro, token_buckets=(64, 128), frame_buckets=(96, 256))
    filled = plain.speak([*rows, rows[0]])  # what the graphs ran: the batch with its filler row
    for graphed, back, expected in zip(first, reversed(again), filled, strict=False):
        assert np.array_equal(graphed.durations, expected.durations)
        assert np.array_equal(graphed.audio, expected.audio)  # the static buffers held this call's rows
        assert np.array_equal(back.audio, expected.audio)  # ... and the next call's, in another order
        assert np.abs(graphed.audio).max() > 0.05
