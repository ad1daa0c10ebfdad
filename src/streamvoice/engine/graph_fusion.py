"""Fewer passes over the decoder's activations: exact rewrites of its elementwise chains.

With the convolutions in static int8 (``static_decoder``), most of a decoder call is elementwise work over
[batch, channels, time] tensors, one pass per ONNX node, and ONNX Runtime fuses none of it on a CPU. Each
rewrite here computes the same function with fewer passes over those tensors (the per-channel parts are
[1, C, 1] and cost nothing):

- **norm and style affine**: ``(x - mean) / sqrt(var + eps) * (1 + gamma) + beta`` (four passes) becomes
  ``x * s + t`` with ``s = (1 + gamma) / sqrt(var + eps)`` and ``t = beta - mean * s`` (two);
- **snake after it**: ``y + sin(a y)^2 / a`` with ``y = x s + t`` (five passes, plus the two of ``y``)
  becomes ``(z + sin(z)^2) / a`` with ``z = x (a s) + a t`` (six in all, ``y`` never made);
- **squares**: ``Pow(x, 2)`` becomes ``Mul(x, x)`` (ONNX Runtime's ``Pow`` is its slowest elementwise op here);
- **the source's spectrum**: the generator's ``STFT`` (20-point frames, hop 5) becomes one strided ``Conv``
  on the windowed DFT basis, whose kernel is 30x faster than ONNX Runtime's ``STFT`` here.

Rewrites match by structure and leave anything else as it is; each returns how many it made, so a test
(``tests/test_graph_fusion.py``) pins that they all apply to Kokoro's decoder and that the graph computes
the same audio. ``python -m streamvoice.bench.engine`` measures the speed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamvoice.engine.norm_stats import BLEND_PRIOR, BLEND_WINDOW, topological

STFT_CONV = "stft_conv"  # in the names of the convolutions that replace the STFT: kept float by static int8


@dataclass
class _Graph:
    """The graph's nodes with their producers and consumers, and the constants, for matching."""

    graph: Any
    producer: dict[str, Any] = field(default_factory=dict)
    consumers: dict[str, list[Any]] = field(default_factory=dict)
    constants: dict[str, np.ndarray[Any, Any]] = field(default_factory=dict)
    added: int = 0

    def __post_init__(self) -> None:
        from onnx import numpy_helper

        for node in self.graph.node:
            for out in node.output:
                self.producer[out] = node
            for name in dict.fromkeys(node.input):
                self.consumers.setdefault(name, []).append(node)
        self.constants = {i.name: numpy_helper.to_array(i) for i in self.graph.initializer}

    def made_by(self, name: str, op: str) -> Any | None:
        node = self.producer.get(name)
        return node if node is not None and node.op_type == op else None

    def only_reader(self, name: str, op: str) -> Any | None:
        """The one node that reads ``name``, if it is an ``op`` (and nothing else, not a graph output, reads it)."""
        readers = self.consumers.get(name, [])
        if len(readers) != 1 or readers[0].op_type != op or name in {o.name for o in self.graph.output}:
            return None
        return readers[0]

    def other(self, node: Any, name: str) -> str:
        """The input of a two-input node that is not ``name``."""
        a, b = node.input
        return str(b if a == name else a)

    def constant(self, array: np.ndarray[Any, Any], hint: str) -> str:
        from onnx import numpy_helper

        self.added += 1
        name = f"fusion/{hint}/{self.added}"
        self.graph.initializer.append(numpy_helper.from_array(array, name))
        return name


def _node(op: str, inputs: list[str], output: str, name: str | None = None, **attributes: Any) -> Any:
    from onnx import helper

    return helper.make_node(op, inputs, [output], name=name or output, **attributes)


def _replace(graph: Any, drop: set[int], add: list[Any]) -> None:
    nodes = [n for n in graph.node if id(n) not in drop] + add
    ordered = topological(nodes, graph)
    del graph.node[:]
    graph.node.extend(ordered)


def _is_blended_mean(g: _Graph, name: str) -> bool:
    """``name`` is a norm's mean as ``norm_stats`` blends it (prior and window weights)."""
    add = g.made_by(name, "Add")
    if add is None:
        return False
    weights = {i for part in add.input if (m := g.made_by(part, "Mul")) is not None for i in m.input}
    return {BLEND_PRIOR, BLEND_WINDOW} <= weights


def fold_norm_affine(model: Any) -> int:
    """``(x - mean) / sd * g + beta`` -> ``x * s + t`` with per-channel ``s, t`` (see the module)."""
    g = _Graph(model.graph)
    drop: set[int] = set()
    add: list[Any] = []
    for sub in list(model.graph.node):
        if sub.op_type != "Sub" or not _is_blended_mean(g, sub.input[1]):
            continue
        x, mean = sub.input
        div = g.only_reader(sub.output[0], "Div")
        if div is None or div.input[0] != sub.output[0]:
            continue
        mul = g.only_reader(div.output[0], "Mul")
        if mul is None:
            continue
        shift = g.only_reader(mul.output[0], "Add")
        if shift is None:
            continue
        sd, gain, beta = div.input[1], g.other(mul, div.output[0]), g.other(shift, mul.output[0])
        p = shift.output[0] + "/fold"
        add += [
            _node("Div", [gain, sd], p + "/s"),
            _node("Mul", [mean, p + "/s"], p + "/ms"),
            _node("Sub", [beta, p + "/ms"], p + "/t"),
            _node("Mul", [x, p + "/s"], p + "/xs"),
            _node("Add", [p + "/xs", p + "/t"], shift.output[0]),
        ]
        drop.update(id(n) for n in (sub, div, mul, shift))
    if drop:
        _replace(model.graph, drop, add)
    return len(drop) // 4


def fold_snake(model: Any) -> int:
    """``y + (1/a) sin(a y)^2`` on a folded norm ``y = x s + t`` -> ``(z + sin(z)^2) (1/a)``, ``z = x (a s) + a t``."""
    g = _Graph(model.graph)
    drop: set[int] = set()
    add: list[Any] = []
    for shift in list(model.graph.node):
        if shift.op_type != "Add":
            continue
        y = shift.output[0]
        scaled = g.made_by(shift.input[0], "Mul")
        if scaled is None or not scaled.name.endswith("/fold/xs"):
            continue
        x, s, t = scaled.input[0], scaled.input[1], shift.input[1]
        readers = g.consumers.get(y, [])
        times_a = [n for n in readers if n.op_type == "Mul"]
        if len(readers) != 2 or len(times_a) != 1:
            continue
        alpha = g.other(times_a[0], y)
        sin = g.only_reader(times_a[0].output[0], "Sin")
        square = g.only_reader(sin.output[0], "Pow") if sin is not None else None
        if square is None or not _is_square(g, square):
            continue
        over_a = g.only_reader(square.output[0], "Mul")
        if over_a is None or alpha not in g.constants:
            continue
        inverse = g.other(over_a, square.output[0])
        out = g.only_reader(over_a.output[0], "Add")
        if out is None or g.other(out, over_a.output[0]) != y or inverse not in g.constants:
            continue
        a = g.constants[alpha]
        if not np.allclose(g.constants[inverse] * a, 1.0, rtol=1e-6):
            continue
        p = out.output[0] + "/snake"
        add += [
            _node("Mul", [alpha, s], p + "/as"),
            _node("Mul", [alpha, t], p + "/at"),
            _node("Mul", [x, p + "/as"], p + "/xas"),
            _node("Add", [p + "/xas", p + "/at"], p + "/z"),
            _node("Sin", [p + "/z"], p + "/sin"),
            _node("Mul", [p + "/sin", p + "/sin"], p + "/sin2"),
            _node("Add", [p + "/z", p + "/sin2"], p + "/sum"),
            _node("Mul", [p + "/sum", inverse], out.output[0]),
        ]
        drop.update(id(n) for n in (scaled, shift, times_a[0], sin, square, over_a, out))
    if drop:
        _replace(model.graph, drop, add)
    return len(drop) // 7


def _is_square(g: _Graph, node: Any) -> bool:
    exponent = g.constants.get(node.input[1])
    return node.op_type == "Pow" and exponent is not None and exponent.size == 1 and float(exponent) == 2.0


def square_by_mul(model: Any) -> int:
    """``Pow(x, 2)`` -> ``Mul(x, x)``."""
    g = _Graph(model.graph)
    count = 0
    for node in model.graph.node:
        if node.op_type == "Pow" and _is_square(g, node):
            node.op_type = "Mul"
            node.input[1] = node.input[0]
            count += 1
    return count


def stft_as_conv(model: Any) -> int:
    """The generator's one-sided ``STFT`` read as real and imaginary parts -> a strided ``Conv`` on the
    windowed DFT basis: ``Re = sum x w cos(2 pi k n / N)``, ``Im = -sum x w sin(...)`` (ONNX's sign)."""
    g = _Graph(model.graph)
    drop: set[int] = set()
    add: list[Any] = []
    for stft in list(model.graph.node):
        if stft.op_type != "STFT" or len(stft.input) != 4:
            continue
        signal, step, window, length = stft.input
        if step not in g.constants or window not in g.constants:
            continue
        w = g.constants[window].astype(np.float64)
        n = w.size
        if length and (length not in g.constants or int(g.constants[length]) != n):
            continue
        onesided = next((a.i for a in stft.attribute if a.name == "onesided"), 1)
        transpose = g.only_reader(stft.output[0], "Transpose")
        perm = list(next((a.ints for a in transpose.attribute if a.name == "perm"), [])) if transpose else []
        if not onesided or perm != [0, 2, 1, 3]:
            continue
        parts = g.consumers.get(transpose.output[0], [])  # type: ignore[union-attr]
        picks = [
            (node, int(g.constants[node.input[1]]))
            for node in parts
            if node.op_type == "Gather"
            and node.input[1] in g.constants
            and next((a.i for a in node.attribute if a.name == "axis"), 0) == 3
        ]
        if len(picks) != len(parts) or not picks:
            continue
        basis = _dft_basis(w)
        p = stft.output[0] + "/conv"
        shape = g.constant(np.array([0, 1, -1], dtype=np.int64), "stft_shape")
        add.append(_node("Reshape", [signal, shape], p + "/signal"))
        hop = int(g.constants[step])
        for gather, part in picks:
            inputs = [p + "/signal", g.constant(basis[part], "stft_basis")]
            if part == 1:
                inputs.append(g.constant(_positive_zero(n), "stft_zero"))
            name = f"{stft.name}/{STFT_CONV}/{'re' if part == 0 else 'im'}"
            add.append(_node("Conv", inputs, gather.output[0], name, kernel_shape=[n], strides=[hop]))
            drop.add(id(gather))
        drop.update({id(stft), id(transpose)})
    if drop:
        _replace(model.graph, drop, add)
    return sum(1 for n in add if n.op_type == "Reshape")


def _dft_basis(window: np.ndarray[Any, Any]) -> dict[int, np.ndarray[Any, Any]]:
    """Real (0) and imaginary (1) one-sided DFT rows times the window, as [bins, 1, n] Conv weights.

    Angles are reduced to whole turns before the cosine and sine, so the rows that are exactly zero in the
    DFT (the imaginary part at 0 and at n/2) are exactly zero here: a phase read with ``atan`` downstream
    flips by a whole turn on the sign of a 1e-16 residue, and Kokoro feeds the phase to its convolutions.
    """
    n = window.size
    turns = (np.arange(n // 2 + 1)[:, None] * np.arange(n)[None, :]) % n / n
    cos, sin = np.cos(2 * np.pi * turns), np.sin(2 * np.pi * turns)
    cos[np.abs(cos) < 1e-12], sin[np.abs(sin) < 1e-12] = 0.0, 0.0
    return {
        0: (window * cos).astype(np.float32)[:, None, :],
        1: (-window * sin).astype(np.float32)[:, None, :],
    }


def _positive_zero(n: int) -> np.ndarray[Any, Any]:
    """The imaginary rows' bias: +1e-30 where the DFT's imaginary part is zero (0 and n/2), else 0.

    Kokoro was trained on ``torch.atan2(imag, real)``, which reads an exact +0 against a negative real part as
    +pi; its export spells atan2 with ``Atan``, ``Greater(imag, 0)`` and ``Where``, which reads the same +0 as
    -pi. Exact zeros there cost PESQ 3.2-3.9 against the exported graph (whose STFT leaves a residue, mostly
    positive); a positive residue that is far below any signal gives +pi, as in training (PESQ 4.2-4.5,
    the float graph's own 4.3-4.5).
    """
    bias = np.zeros(n // 2 + 1, dtype=np.float32)
    bias[0] = bias[n // 2] = 1e-30
    return bias


def fuse(model: Any) -> dict[str, int]:
    """Every rewrite, in order (the snake fold needs the folded norms); how many of each were made."""
    counts = {"norm_affine": fold_norm_affine(model)}
    counts["snake"] = fold_snake(model)
    counts["square"] = square_by_mul(model)
    counts["stft"] = stft_as_conv(model)
    used = {name for node in model.graph.node for name in node.input}
    kept = [i for i in model.graph.initializer if i.name in used]  # the constants the rewrites orphaned
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    return counts
