"""Whole-piece instance-norm statistics for a decoder that only ever sees a window of the piece.

Kokoro's decoder normalises its activations over time (AdaIN: instance norm, then a style-driven scale and
shift) 54 times. Decoded whole, every norm takes its mean and variance over the whole piece; decoded in a
window, over the window. That difference, not the seams, is what made windowed audio drift from
whole-piece audio (~7-10 dB of log-spectral distance), and it is why small windows needed expensive context.

We rewrite each norm so that the statistics it uses are a blend of the window's own and a *prior* that the
caller supplies::

    mean = a * prior_mean + b * window_mean
    var  = a * (prior_var + (prior_mean - mean)^2) + b * (window_var + (window_mean - mean)^2)

which is exactly the mean and variance of the union of two sample sets weighted ``a`` and ``b``. Each
window also returns its own statistics, so the caller keeps an estimate for the parts of the piece it has
not decoded yet: the frames already decoded, the voice's statistics from earlier pieces for the frames
still to come. With ``a = 0, b = 1`` the graph computes exactly what it computed before.

The norms are found by structure: a ``ReduceMean`` over ``x`` whose output is subtracted from ``x``, and the
``ReduceMean`` of the square of that difference. Exports that fuse the norm differently simply get no
rewritten norms, and the windows use their own statistics as before.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

BLEND_PRIOR = "norm_stats.prior_weight"
BLEND_WINDOW = "norm_stats.window_weight"


@dataclass(frozen=True)
class Norm:
    """One instance norm inside the graph."""

    x: str  # the normalised tensor, [1, C, T]
    mean: str  # ReduceMean(x) output, [1, C, 1]
    var: str  # ReduceMean((x - mean)^2) output, [1, C, 1]
    axes: str  # the ReduceMean axes input (the time axis)


def stat_names(index: int) -> tuple[str, str, str, str]:
    """Names of the prior inputs and window outputs added for the ``index``-th norm."""
    p = f"norm_stats.{index}"
    return f"{p}.prior_mean", f"{p}.prior_var", f"{p}.window_mean", f"{p}.window_var"


def find_norms(graph: Any) -> list[Norm]:
    """Instance norms in graph order: ReduceMean(x) -> Sub(x, mean) -> square -> ReduceMean."""
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in dict.fromkeys(node.input):  # a node that reads a tensor twice consumes it once
            consumers.setdefault(name, []).append(node)
    norms: list[Norm] = []
    for node in graph.node:
        if node.op_type != "ReduceMean" or len(node.input) != 2:
            continue
        x, mean = node.input[0], node.output[0]
        subs = [n for n in consumers.get(mean, []) if n.op_type == "Sub" and list(n.input) == [x, mean]]
        if len(subs) != 1:
            continue
        diff = subs[0].output[0]
        squares = [
            n
            for n in consumers.get(diff, [])
            if (n.op_type == "Mul" and list(n.input) == [diff, diff]) or n.op_type == "Pow"
        ]
        var = [
            r.output[0]
            for sq in squares
            for r in consumers.get(sq.output[0], [])
            if r.op_type == "ReduceMean" and len(r.input) == 2 and r.input[1] == node.input[1]
        ]
        if len(var) == 1:
            norms.append(Norm(x=x, mean=mean, var=var[0], axes=node.input[1]))
    return norms


def add_prior_inputs(model: Any, norms: list[Norm]) -> Any:
    """Rewrite every norm to blend a caller-supplied prior with the window's statistics (in place)."""
    from onnx import TensorProto, helper

    if not norms:
        return model
    graph = model.graph
    replaced = {name for n in norms for name in (n.mean, n.var)}
    kept = [node for node in graph.node if not (set(node.output) & replaced)]
    added: list[Any] = []
    graph.input.extend(
        helper.make_tensor_value_info(name, TensorProto.FLOAT, [1]) for name in (BLEND_PRIOR, BLEND_WINDOW)
    )
    for i, norm in enumerate(norms):
        pm, pv, wm, wv = stat_names(i)
        t = f"norm_stats.{i}."

        def op(kind: str, inputs: list[str], out: str) -> str:
            added.append(helper.make_node(kind, inputs, [out], name=out))
            return out

        # The window's own statistics, computed exactly as the original norm did.
        op("ReduceMean", [norm.x, norm.axes], wm)
        d = op("Sub", [norm.x, wm], t + "d")
        op("ReduceMean", [op("Mul", [d, d], t + "d2"), norm.axes], wv)
        # Blend, as the union of two weighted sample sets.
        mean = op(
            "Add",
            [op("Mul", [pm, BLEND_PRIOR], t + "am"), op("Mul", [wm, BLEND_WINDOW], t + "bm")],
            norm.mean,
        )
        dp = op("Sub", [pm, mean], t + "dp")
        dw = op("Sub", [wm, mean], t + "dw")
        prior_part = op("Add", [pv, op("Mul", [dp, dp], t + "dp2")], t + "pvar")
        window_part = op("Add", [wv, op("Mul", [dw, dw], t + "dw2")], t + "wvar")
        op(
            "Add",
            [
                op("Mul", [prior_part, BLEND_PRIOR], t + "av"),
                op("Mul", [window_part, BLEND_WINDOW], t + "bv"),
            ],
            norm.var,
        )
        graph.input.extend(
            helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, None, 1]) for name in (pm, pv)
        )
        graph.output.extend(
            helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, None, 1]) for name in (wm, wv)
        )
    del graph.node[:]
    graph.node.extend(live(topological(kept + added, graph), graph))
    return model


def live(nodes: list[Any], graph: Any) -> list[Any]:
    """Drop nodes whose outputs nothing reads any more (the old variance computations); needs topological order."""
    wanted = {o.name for o in graph.output}
    kept: list[Any] = []
    for node in reversed(nodes):
        if any(out in wanted for out in node.output):
            kept.append(node)
            wanted.update(node.input)
    return kept[::-1]


def topological(nodes: list[Any], graph: Any) -> list[Any]:
    """Order nodes so each comes after the producers of its inputs (Kahn's algorithm, stable)."""
    available = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    produced = {out for node in nodes for out in node.output}
    waiting: dict[str, list[int]] = {}
    missing: list[int] = []
    for k, node in enumerate(nodes):
        needs = {i for i in node.input if i in produced and i not in available}
        missing.append(len(needs))
        for name in needs:
            waiting.setdefault(name, []).append(k)
    ready = [k for k, m in enumerate(missing) if m == 0]
    order: list[Any] = []
    heapq.heapify(ready)
    while ready:
        k = heapq.heappop(ready)
        order.append(nodes[k])
        for out in nodes[k].output:
            for j in waiting.pop(out, []):
                missing[j] -= 1
                if missing[j] == 0:
                    heapq.heappush(ready, j)
    if len(order) != len(nodes):
        raise ValueError("the rewritten graph has a cycle")
    return order


@dataclass(frozen=True)
class NormStats:
    """Per-norm (mean, variance) over some number of frames: what a piece, or a voice, looks like."""

    means: tuple[NDArray[np.float64], ...]
    variances: tuple[NDArray[np.float64], ...]
    frames: float

    @staticmethod
    def merge(a: NormStats | None, b: NormStats | None) -> NormStats | None:
        """Statistics of the union of both frame sets."""
        if a is None or a.frames <= 0:
            return b
        if b is None or b.frames <= 0:
            return a
        n = a.frames + b.frames
        wa, wb = a.frames / n, b.frames / n
        means, variances = [], []
        for ma, va, mb, vb in zip(a.means, a.variances, b.means, b.variances, strict=True):
            m = wa * ma + wb * mb
            means.append(m)
            variances.append(wa * (va + (ma - m) ** 2) + wb * (vb + (mb - m) ** 2))
        return NormStats(tuple(means), tuple(variances), n)

    def weighted(self, frames: float) -> NormStats:
        """The same statistics, counted as ``frames`` frames."""
        return NormStats(self.means, self.variances, frames)

    @staticmethod
    def from_outputs(values: list[NDArray[Any]], frames: float) -> NormStats:
        """From the decoder's extra outputs: window mean and variance for each norm, in order."""
        return NormStats(
            tuple(np.asarray(v, dtype=np.float64) for v in values[0::2]),
            tuple(np.asarray(v, dtype=np.float64) for v in values[1::2]),
            frames,
        )
