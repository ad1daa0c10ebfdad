"""The decoder as the CUDA provider runs it: no node left for the CPU in the middle of a window.

Two of Kokoro's decoder operators have no kernel in ONNX Runtime's CUDA provider:

- the harmonic source's ``STFT``, which ran on the CPU between two copies, its cost growing with the window's
  samples and the batch's rows (on an H200: 15 ms of a 68 ms 24-frame window, 117 ms of a 194 ms whole
  piece). Read as two strided convolutions on the windowed DFT basis, the same spectrum is computed where
  the rest of the decoder runs;
- the ``Atan`` of the source's phase: two copies a call, and as the one compute node off the GPU it stops
  ONNX Runtime from capturing the decoder as a CUDA graph. Written as a polynomial of the reduced argument
  (within 2e-7 of ``atan``, about a float32 step near pi / 2), it runs with the rest.

Both measured by ``python -m streamvoice.bench.gpu`` (its profile and ``captured`` steps; docs/benchmarks.md
9b). On a CPU the STFT rewrite loses (``python -m streamvoice.bench.static_int8 --candidates conv_post,stft``:
the float convolution on one channel sends the CPU's channels-last transposes through the graph), so only
CUDA sessions get these (``SplitKokoro``). ``tests/test_cuda_graph.py`` checks the spectrum, the arctangent
and a real window's audio.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from streamvoice.engine.surgery.graph_fusion import Matcher, node, replace_nodes


def for_cuda(decoder: bytes) -> bytes:
    """The decoder graph with the rewrites the CUDA provider needs (the graph itself when none applies)."""
    import onnx

    model = onnx.load_from_string(decoder)
    changed = stft_as_conv(model)
    changed += atan_as_polynomial(model)
    return model.SerializeToString() if changed else decoder


def stft_as_conv(model: Any) -> int:
    """The generator's one-sided ``STFT`` read as real and imaginary parts -> a strided ``Conv`` on the
    windowed DFT basis: ``Re = sum x w cos(2 pi k n / N)``, ``Im = -sum x w sin(...)`` (ONNX's sign)."""
    g = Matcher(model.graph)
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
        add.append(node("Reshape", [signal, shape], p + "/signal"))
        hop = int(g.constants[step])
        for gather, part in picks:
            inputs = [p + "/signal", g.constant(basis[part], "stft_basis")]
            if part == 1:
                inputs.append(g.constant(_signed_zero(n), "stft_zero"))
            name = f"{stft.name}/stft_conv/{'re' if part == 0 else 'im'}"
            add.append(node("Conv", inputs, gather.output[0], name, kernel_shape=[n], strides=[hop]))
            drop.add(id(gather))
        drop.update({id(stft), id(transpose)})
    if drop:
        replace_nodes(model.graph, drop, add)
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


def _signed_zero(n: int) -> np.ndarray[Any, Any]:
    """The imaginary rows' bias: a residue far below any signal where the DFT's imaginary part is exactly
    zero (bins 0 and n/2), with the sign ONNX Runtime's STFT leaves there; 0 elsewhere.

    Kokoro's export spells atan2 with ``Atan``, ``Greater(imag, 0)`` and ``Where``, so the phase of those two
    bins (which the decoder's convolutions read) is +pi or -pi by the sign of the residue whenever the real
    part is negative. ONNX Runtime's STFT leaves a positive residue at bin 0 in 88% of frames and a negative
    one at n/2 in 86% (a real window of af_heart). Exact zeros (every such phase -pi) cost PESQ 3.2-3.9 against
    the exported graph, in float; +1e-30 at both bins 4.2-4.5, the float graph's own 4.3-4.5.
    """
    bias = np.zeros(n // 2 + 1, dtype=np.float32)
    bias[0], bias[n // 2] = 1e-30, -1e-30
    return bias


# atan(t) / t on [0, 1] as a polynomial in t^2 (Abramowitz & Stegun 4.4.49): |error| <= 2e-8, below float32's
# resolution near pi / 4; ``tests/test_cuda_graph.py`` checks it against numpy's arctan over the reals.
_ATAN_COEFFICIENTS = (
    1.0, -0.3333314528, 0.1999355085, -0.1420889944, 0.1065626393,
    -0.0752896400, 0.0429096138, -0.0161657367, 0.0028662257,
)  # fmt: skip


def atan_as_polynomial(model: Any) -> int:
    """Each ``Atan`` -> ``sign(x) * f(|x|)`` with ``f(a) = p(a)`` for ``a <= 1`` and ``pi/2 - p(1/a)`` above
    (``p``: the polynomial above), in operators the CUDA provider runs; +-inf gives +-pi/2, as ``atan``."""
    g = Matcher(model.graph)
    drop: set[int] = set()
    add: list[Any] = []

    def c(value: float, hint: str) -> str:
        return g.constant(np.array(value, dtype=np.float32), hint)

    for atan in list(model.graph.node):
        if atan.op_type != "Atan":
            continue
        x, out = atan.input[0], atan.output[0]
        p = f"{atan.name or out}/polynomial"
        add += [
            node("Abs", [x], p + "/abs"),
            node("Greater", [p + "/abs", c(1.0, "atan_one")], p + "/outside"),
            node("Reciprocal", [p + "/abs"], p + "/inverse"),
            node("Where", [p + "/outside", p + "/inverse", p + "/abs"], p + "/t"),
            node("Mul", [p + "/t", p + "/t"], p + "/t2"),
        ]
        acc = c(_ATAN_COEFFICIENTS[-1], "atan_coefficient")
        for k, coefficient in enumerate(reversed(_ATAN_COEFFICIENTS[:-1])):
            add += [
                node("Mul", [acc, p + "/t2"], f"{p}/horner{k}"),
                node("Add", [f"{p}/horner{k}", c(coefficient, "atan_coefficient")], f"{p}/sum{k}"),
            ]
            acc = f"{p}/sum{k}"
        add += [
            node("Mul", [acc, p + "/t"], p + "/inside"),
            node("Sub", [c(np.pi / 2, "atan_half_pi"), p + "/inside"], p + "/complement"),
            node("Where", [p + "/outside", p + "/complement", p + "/inside"], p + "/magnitude"),
            node("Sign", [x], p + "/sign"),
            node("Mul", [p + "/sign", p + "/magnitude"], out, atan.name),
        ]
        drop.add(id(atan))
    if drop:
        replace_nodes(model.graph, drop, add)
    return len(drop)
