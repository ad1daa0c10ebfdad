"""Graph surgery that gives the split decoder a batch dimension, so windows of several listeners share a call.

The AWS reference design says Kokoro cannot batch because whole pieces differ in length after the duration
expansion. The windowed decoder does not have that problem: a window of ``n`` aligned frames has the same
shape whoever it belongs to, and its norms already take their statistics per call (``norm_stats``), so
per row once the prior inputs carry a batch dimension. What stands in the way is the export itself, which
traced a batch of one into a few places:

- the harmonic source is reshaped to ``[1, 1, samples]`` (a Concat of constants): the first ``1`` becomes
  ``0``, which ``Reshape`` reads as "keep the input's batch";
- the padded source is reshaped to ``[shape[1], shape[2]]`` (dropping what was a batch of one): it reads
  ``shape[0]`` instead, which is the same number for one row and the batch for several;
- the inverse STFT's window-sum normalisation is a ``ScatterND`` whose indices pair a batch range with the
  sample positions by broadcasting ``[batch, 1] + [positions, 1]``, which only works for one row: it is
  rebuilt as elementwise divisions: the export normalises only the first ``n_fft`` samples (the window
  sum's slice), so ``concat(head / where(window_sum > threshold, window_sum, 1), tail)``, the same values
  for any batch (dividing by one leaves the samples the export left alone) and no ``NonZero``, whose
  data-dependent shape would stop a GPU from replaying the decoder as one captured CUDA graph;
- the output is squeezed to one row: the graph now ends at the batched audio, ``[batch, 1, samples]``.

One row through the rewritten graph is bit-identical to the original (``tests/test_batching.py``). The
rows of a batch share the int8 model's dynamic quantisation scales (one per tensor, over the whole batch),
so a row's audio differs slightly from the same window decoded alone; the tests bound that difference by
speech-to-text and spectral distance. Exports whose structure differs are left unbatched.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamvoice.engine.surgery.norm_stats import BLEND_PRIOR, BLEND_WINDOW, live

BATCH = "batch"
_GEN = "/decoder/decoder/generator/"
_STFT = _GEN + "istft/stft/"


class BatchGraphError(RuntimeError):
    """The decoder's graph does not have the structure the batch surgery knows."""


def make_batchable(model: Any) -> None:
    """Rewrite the split decoder (in place) to take and return a batch of windows; see the module doc."""
    from onnx import numpy_helper

    graph = model.graph
    nodes = {n.name: n for n in graph.node}

    def node(name: str, op: str) -> Any:
        found = nodes.get(name)
        if found is None or found.op_type != op:
            raise BatchGraphError(f"expected a {op} node named {name!r}")
        return found

    keep_batch = "batch_graph.keep_batch"
    graph.initializer.append(numpy_helper.from_array(np.array([0], dtype=np.int64), keep_batch))
    # 1. [1, 1, samples] -> [0, 1, samples]: keep the batch.
    node(_GEN + "Concat", "Concat").input[0] = keep_batch
    # 2. [shape[1], shape[2]] -> [shape[0], shape[2]]: the row count, not a dimension that is always 1.
    node(_GEN + "Gather_2", "Gather").input[1] = _scalar_initializer(graph, 0)
    # 3. The window-sum normalisation as elementwise divisions, the same for every row.
    _batch_istft_normalisation(graph, node(_STFT + "ScatterND", "ScatterND"))
    # 4. End at the batched audio, before the export squeezes it to one row.
    _end_at_batched_audio(graph)
    _batch_dimensions(graph)
    _prune(graph)


def _batch_istft_normalisation(graph: Any, scatter: Any) -> None:
    """The inverse STFT's normalisation for every row. The export scatters ``signal[positions] /
    window_sum[positions]`` at ``positions = nonzero(window_sum > threshold)``, where ``window_sum`` is a
    slice as long as the FFT (the samples it normalises): the same is the signal's head divided by the window
    sum where it exceeds the threshold and by one elsewhere, then its tail (bit-identical: the same division
    at the same samples, ``tests/test_batching.py::test_the_batch_surgery_changes_no_sample``)."""
    from onnx import helper, numpy_helper

    producers = {out for n in graph.node for out in n.output}
    signal, above, window_sum = (
        _STFT + "Squeeze_1_output_0",
        _STFT + "Greater_output_0",
        _STFT + "Slice_1_output_0",
    )
    for name in (signal, above, window_sum):
        if name not in producers:
            raise BatchGraphError(f"the inverse STFT has no tensor {name!r}")
    p = "batch_graph.istft."
    constants: dict[str, NDArray[Any]] = {
        "one": np.array(1.0, dtype=np.float32),
        "zero": np.array([0], dtype=np.int64),
        "end": np.array([np.iinfo(np.int64).max], dtype=np.int64),
        "axis": np.array([1], dtype=np.int64),
    }
    graph.initializer.extend(numpy_helper.from_array(v, p + k) for k, v in constants.items())

    def op(kind: str, inputs: list[str], out: str, **attrs: Any) -> Any:
        return helper.make_node(kind, inputs, [out], name=out, **attrs)

    rebuilt = [
        op("Shape", [window_sum], p + "length"),
        op("Slice", [signal, p + "zero", p + "length", p + "axis"], p + "head"),
        op("Slice", [signal, p + "length", p + "end", p + "axis"], p + "tail"),
        op("Where", [above, window_sum, p + "one"], p + "divisor"),
        op("Div", [p + "head", p + "divisor"], p + "normalised"),
        op("Concat", [p + "normalised", p + "tail"], scatter.output[0], axis=1),
    ]
    at = list(graph.node).index(scatter)
    graph.node.remove(scatter)
    for k, new in enumerate(rebuilt):
        graph.node.insert(at + k, new)


def _end_at_batched_audio(graph: Any) -> None:
    """The audio output becomes the batched audio before the export's squeeze (Gather, Reshape [1, -1],
    Gather)."""
    from onnx import helper

    producers = {out: n for n in graph.node for out in n.output}
    out = graph.output[0]
    tail = producers.get(out.name)
    for expected in ("Gather", "Reshape", "Gather"):
        if tail is None or tail.op_type != expected:
            raise BatchGraphError("the decoder's output is not the expected squeeze of the batched audio")
        tail = producers.get(tail.input[0])
    if tail is None:
        raise BatchGraphError("the decoder's output has no batched audio before it")
    outputs = list(graph.output)
    outputs[0] = helper.make_tensor_value_info(tail.output[0], out.type.tensor_type.elem_type, None)
    del graph.output[:]
    graph.output.extend(outputs)


def _batch_dimensions(graph: Any) -> None:
    """Every input and statistics output gets a batch dimension; inferred intermediate shapes are dropped.
    The blend weights become one per row, shaped to broadcast over the norms' [batch, channels, 1]."""
    from onnx import helper

    for value in graph.input:
        if value.name in (BLEND_PRIOR, BLEND_WINDOW):
            value.CopyFrom(
                helper.make_tensor_value_info(value.name, value.type.tensor_type.elem_type, [BATCH, 1, 1])
            )
    for value in [*graph.input, *graph.output[1:]]:
        dims = value.type.tensor_type.shape.dim
        if dims:
            dims[0].ClearField("dim_value")
            dims[0].dim_param = BATCH
    del graph.value_info[:]


def _prune(graph: Any) -> None:
    """Nodes and initializers nothing reads any more go."""
    kept = live(list(graph.node), graph)
    del graph.node[:]
    graph.node.extend(kept)
    used = {name for n in graph.node for name in n.input}
    initializers = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(initializers)


def _scalar_initializer(graph: Any, value: int) -> str:
    from onnx import numpy_helper

    name = f"batch_graph.index_{value}"
    graph.initializer.append(numpy_helper.from_array(np.array(value, dtype=np.int64), name))
    return name
