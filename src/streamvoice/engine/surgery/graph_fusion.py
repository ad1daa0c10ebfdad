"""Fewer passes over the decoder's activations: rewrites of its elementwise chains, exact but for one sine.

With the convolutions in static int8 (``static_decoder``), most of a decoder call is elementwise work over
[batch, channels, time] tensors, one pass per ONNX node, and ONNX Runtime fuses none of it on a CPU. Each
rewrite here computes the same function (the snake's sine squared to within 2.5e-5) with fewer passes over
those tensors (the per-channel parts are [1, C, 1] and cost nothing):

- **norm and style affine**: ``(x - mean) / sqrt(var + eps) * (1 + gamma) + beta`` (four passes) becomes
  ``x * s + t`` with ``s = (1 + gamma) / sqrt(var + eps)`` and ``t = beta - mean * s`` (two);
- **snake after it**: ``y + sin(a y)^2 / a`` with ``y = x s + t`` (five passes, plus the two of ``y``)
  becomes ``(w + S(w)) (pi / a)`` with ``w = x (a s / pi) + a t / pi`` and ``S(w) = sin(pi w)^2 / pi``, ``y``
  never made. ONNX Runtime's ``Sin`` costs as much as ~18 elementwise products on this CPU (``python -m
  streamvoice.bench.kernels``) and a snake only needs its square, whose period is one in ``w``: ``S`` is
  an even polynomial of ``f = w - round(w)`` (``SIN2_POLYNOMIAL``, within 2.5e-5 of ``sin^2``, far inside the
  int8 step of the convolution it feeds), ten cheap passes in place of ``Sin`` and a square (the
  before and after of ``bench.engine``: docs/benchmarks.md 10c);
- **squares**: ``Pow(x, 2)`` becomes ``Mul(x, x)`` (ONNX Runtime's ``Pow`` is its slowest elementwise op here).

The harmonic source's ``STFT`` (5-7% of the static decoder's kernel time) as a strided convolution was
measured and lost: the phase of its bins 0 and n/2 is the sign of a rounding residue, which no rewrite
reproduces (``python -m streamvoice.bench.static_int8 --candidates conv_post,stft``; docs/benchmarks.md 10c).

Rewrites match by structure and leave anything else as it is; each returns how many it made, so a test
(``tests/test_graph_fusion.py``) pins that they all apply to Kokoro's decoder and that the graph computes
the same audio. ``python -m streamvoice.bench.engine`` measures the speed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamvoice.engine.surgery.norm_stats import BLEND_PRIOR, BLEND_WINDOW, topological

# The name ending of a folded norm's ``x * s``: what ``fold_snake`` looks for after ``fold_norm_affine``.
FOLDED_PRODUCT = "/fold/xs"

# sin(pi f)^2 ~ v (c1 + v (c2 + v (c3 + v c4))), v = f^2, |f| <= 1/2: a least-maximum-error fit, worst error
# 2.3e-5 (``tests/test_graph_fusion.py`` checks it on a fine grid).
SIN2_POLYNOMIAL = (9.86667744, -32.35394925, 41.29556749, -22.99233219)


@dataclass
class Matcher:
    """The graph's nodes with their producers and consumers, and the constants, for matching."""

    graph: Any
    producer: dict[str, Any] = field(default_factory=dict)
    consumers: dict[str, list[Any]] = field(default_factory=dict)
    constants: dict[str, np.ndarray[Any, Any]] = field(default_factory=dict)
    outputs: set[str] = field(default_factory=set)  # the graph's outputs: read by its caller too
    added: int = 0

    def __post_init__(self) -> None:
        from onnx import numpy_helper

        for node in self.graph.node:
            for out in node.output:
                self.producer[out] = node
            for name in dict.fromkeys(node.input):
                self.consumers.setdefault(name, []).append(node)
        self.constants = {i.name: numpy_helper.to_array(i) for i in self.graph.initializer}
        self.outputs = {o.name for o in self.graph.output}

    def made_by(self, name: str, op: str) -> Any | None:
        node = self.producer.get(name)
        return node if node is not None and node.op_type == op else None

    def only_reader(self, name: str, op: str) -> Any | None:
        """The one node that reads ``name``, if it is an ``op`` (and nothing else, not a graph output, reads it)."""
        readers = self.consumers.get(name, [])
        if len(readers) != 1 or readers[0].op_type != op or name in self.outputs:
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


def node(op: str, inputs: list[str], output: str, name: str | None = None, **attributes: Any) -> Any:
    from onnx import helper

    return helper.make_node(op, inputs, [output], name=name or output, **attributes)


def replace_nodes(graph: Any, drop: set[int], add: list[Any]) -> None:
    nodes = [n for n in graph.node if id(n) not in drop] + add
    ordered = topological(nodes, graph)
    del graph.node[:]
    graph.node.extend(ordered)


def keep_only_used(graph: Any, nodes: list[Any]) -> None:
    """Set ``nodes`` without those whose outputs nothing uses, and drop unused initializers."""
    outputs = {o.name for o in graph.output}
    while True:
        used = outputs | {i for n in nodes for i in n.input}
        kept = [n for n in nodes if any(o in used for o in n.output)]
        if len(kept) == len(nodes):
            break
        nodes = kept
    del graph.node[:]
    graph.node.extend(nodes)
    used = {i for n in nodes for i in n.input}
    initializers = [i for i in graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(initializers)


def _is_blended_mean(g: Matcher, name: str) -> bool:
    """``name`` is a norm's mean as ``norm_stats`` blends it (prior and window weights)."""
    add = g.made_by(name, "Add")
    if add is None:
        return False
    weights = {i for part in add.input if (m := g.made_by(part, "Mul")) is not None for i in m.input}
    return {BLEND_PRIOR, BLEND_WINDOW} <= weights


def fold_norm_affine(model: Any) -> int:
    """``(x - mean) / sd * g + beta`` -> ``x * s + t`` with per-channel ``s, t`` (see the module)."""
    g = Matcher(model.graph)
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
        p, xs = shift.output[0] + "/fold", shift.output[0] + FOLDED_PRODUCT
        add += [
            node("Div", [gain, sd], p + "/s"),
            node("Mul", [mean, p + "/s"], p + "/ms"),
            node("Sub", [beta, p + "/ms"], p + "/t"),
            node("Mul", [x, p + "/s"], xs),
            node("Add", [xs, p + "/t"], shift.output[0]),
        ]
        drop.update(id(n) for n in (sub, div, mul, shift))
    if drop:
        replace_nodes(model.graph, drop, add)
    return len(drop) // 4


def fold_snake(model: Any) -> int:
    """``y + (1/a) sin(a y)^2`` on a folded norm ``y = x s + t`` -> ``(w + S(w)) (pi/a)``, ``w = x (a s/pi) + a t/pi``
    (``S``: ``sin_squared_terms``)."""
    g = Matcher(model.graph)
    drop: set[int] = set()
    add: list[Any] = []
    sin2 = [g.constant(np.array(k / np.pi, np.float32), "sin2") for k in SIN2_POLYNOMIAL]
    for shift in list(model.graph.node):
        if shift.op_type != "Add":
            continue
        y = shift.output[0]
        scaled = g.made_by(shift.input[0], "Mul")
        if scaled is None or not scaled.name.endswith(FOLDED_PRODUCT):
            continue
        x, s, t = scaled.input[0], scaled.input[1], shift.input[1]
        readers = g.consumers.get(y, [])
        times_a = [n for n in readers if n.op_type == "Mul"]
        if len(readers) != 2 or len(times_a) != 1:
            continue
        alpha = g.other(times_a[0], y)
        sin = g.only_reader(times_a[0].output[0], "Sin")
        square = g.only_reader(sin.output[0], "Pow") if sin is not None else None
        if square is None or not is_square(g, square):
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
        a_pi = g.constant((a / np.pi).astype(np.float32), "a_over_pi")
        pi_a = g.constant((np.pi * g.constants[inverse]).astype(np.float32), "pi_over_a")
        add += [
            node("Mul", [a_pi, s], p + "/as"),
            node("Mul", [a_pi, t], p + "/at"),
            node("Mul", [x, p + "/as"], p + "/xas"),
            node("Add", [p + "/xas", p + "/at"], p + "/w"),
            *sin_squared_terms(sin2, p + "/w", p + "/s2"),
            node("Add", [p + "/w", p + "/s2"], p + "/sum"),
            node("Mul", [p + "/sum", pi_a], out.output[0]),
        ]
        drop.update(id(n) for n in (scaled, shift, times_a[0], sin, square, over_a, out))
    if drop:
        replace_nodes(model.graph, drop, add)
    return len(drop) // 7


def sin_squared_terms(c: list[str], w: str, out: str) -> list[Any]:
    """Nodes making ``out = sin(pi w)^2 / pi`` from ``w``: ``f = w - round(w)``, then the polynomial in ``f^2``
    whose coefficients are the constants ``c`` (``SIN2_POLYNOMIAL / pi``) by Horner's rule."""
    last = len(c) - 1
    nodes = [
        node("Round", [w], out + "/r"),
        node("Sub", [w, out + "/r"], out + "/f"),
        node("Mul", [out + "/f", out + "/f"], out + "/v"),
        node("Mul", [out + "/v", c[last]], f"{out}/h{last}"),
    ]
    for i in range(last - 1, -1, -1):
        nodes.append(node("Add", [f"{out}/h{i + 1}", c[i]], f"{out}/a{i}"))
        nodes.append(node("Mul", [f"{out}/a{i}", out + "/v"], out if i == 0 else f"{out}/h{i}"))
    return nodes


def is_square(g: Matcher, node: Any) -> bool:
    exponent = g.constants.get(node.input[1])
    return node.op_type == "Pow" and exponent is not None and exponent.size == 1 and float(exponent) == 2.0


def square_by_mul(model: Any) -> int:
    """``Pow(x, 2)`` -> ``Mul(x, x)``."""
    g = Matcher(model.graph)
    count = 0
    for node in model.graph.node:
        if node.op_type == "Pow" and is_square(g, node):
            node.op_type = "Mul"
            node.input[1] = node.input[0]
            count += 1
    return count


def fuse(model: Any) -> dict[str, int]:
    """Every rewrite, in order (the snake fold needs the folded norms); how many of each were made."""
    counts = {"norm_affine": fold_norm_affine(model)}
    counts["snake"] = fold_snake(model)
    counts["square"] = square_by_mul(model)
    keep_only_used(model.graph, list(model.graph.node))  # the constants the rewrites orphaned
    return counts
