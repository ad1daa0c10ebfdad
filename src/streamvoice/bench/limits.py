"""Know the limit: the arithmetic the engine does per second of audio, against what this machine can do.

From ONNX Runtime's own profile of a real run (the shapes each node saw, after ONNX Runtime's fusions and
layout changes), for the front (one 60-token piece) and for the decoder (full 40-frame windows of the same
piece), each graph as exported and with the static-int8 decoder:

- multiply-accumulates in matrix work (convolutions, matrix products, LSTMs), split into 8-bit integer and
  float, per second of audio; and elements produced by everything else (``Sin``, the norms' and the style
  affine's elementwise chains, ``STFT``, ...), per second of audio;
- each bucket's share of the kernel time, and the rate it ran at.

The machine's peaks are measured, not looked up: a large float32 matrix product (numpy's BLAS, all cores)
and a large 8-bit one (ONNX Runtime's ``MatMulInteger``, u8 x s8, MLAS: the VNNI kernels where the CPU has
them). "How close to the limit" is then the matrix work's rate against the matching peak.

Run: ``python -m streamvoice.bench.limits [--repeat 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from streamvoice.bench.common import machine, table, write_result
from streamvoice.bench.languages import PIECE_60
from streamvoice.bench.tables import md_table, md_value
from streamvoice.engine import KokoroEngine
from streamvoice.engine.streaming.voice_stats_cache import prepare
from streamvoice.protocol import SAMPLE_RATE

CONVS = {"Conv", "FusedConv", "ConvInteger", "QLinearConv", "NhwcFusedConv"}
TRANSPOSED = {"ConvTranspose"}
MATMULS = {"MatMul", "Gemm", "FusedMatMul", "MatMulInteger", "MatMulIntegerToFloat", "QLinearMatMul",
           "DynamicQuantizeMatMul", "FusedGemm"}  # fmt: skip
INTEGER = {"ConvInteger", "QLinearConv", "MatMulInteger", "MatMulIntegerToFloat", "QLinearMatMul",
           "DynamicQuantizeMatMul"}  # fmt: skip


def _shape(entry: dict[str, list[int]]) -> list[int]:
    return next(iter(entry.values()))


def macs(op: str, inputs: list[dict[str, list[int]]], outputs: list[dict[str, list[int]]]) -> int | None:
    """Multiply-accumulates of one matrix-work node from the shapes it ran with (0 for other nodes; None for
    matrix work whose weights the profile does not show, e.g. a ``ConvTranspose`` with pre-packed weights)."""
    try:
        return _macs(op, inputs, outputs)
    except (IndexError, StopIteration):
        return None


def _macs(op: str, inputs: list[dict[str, list[int]]], outputs: list[dict[str, list[int]]]) -> int:
    if op == "QLinearConv":  # its weight is its one signed 8-bit input (where it sits moves with the layout)
        weight = next(
            shape for i in inputs for dtype, shape in i.items() if dtype == "int8" and len(shape) >= 3
        )
        return int(np.prod(_shape(outputs[0]))) * int(np.prod(weight[1:]))
    if op in CONVS:  # output elements x (input channels per group x kernel)
        weight = _shape(inputs[1])
        return int(np.prod(_shape(outputs[0]))) * int(np.prod(weight[1:]))
    if op in TRANSPOSED:  # input elements x (output channels per group x kernel)
        return int(np.prod(_shape(inputs[0]))) * int(np.prod(_shape(inputs[1])[1:]))
    if op in MATMULS:  # output elements x the shared dimension
        return int(np.prod(_shape(outputs[0]))) * _shape(inputs[0])[-1]
    if op == "LSTM":  # per step and direction: 4 gates over the input and the hidden state
        x, w, r = (_shape(i) for i in inputs[:3])
        return x[0] * x[1] * (int(np.prod(w)) + int(np.prod(r)))
    return 0


def profile(
    graph: bytes, feeds: list[dict[str, Any]], disabled: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """ONNX Runtime's per-node profile of ``feeds`` through ``graph``: each is run twice and the second pass
    is kept (the first allocates the arena and warms the caches)."""
    with tempfile.TemporaryDirectory() as folder:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(folder, "profile")
        session = ort.InferenceSession(
            graph, options, providers=["CPUExecutionProvider"], disabled_optimizers=list(disabled) or None
        )
        names = [o.name for o in session.get_outputs()]
        for f in feeds * 2:
            session.run(names, f)
        events = json.loads(Path(session.end_profiling()).read_text())
    nodes = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    return nodes[len(nodes) // 2 :]


def buckets(nodes: list[dict[str, Any]], audio_s: float) -> list[dict[str, Any]]:
    work: dict[str, dict[str, float]] = defaultdict(lambda: {"us": 0.0, "amount": 0.0})
    total_us = sum(n["dur"] for n in nodes)
    for n in nodes:
        args = n["args"]
        op = args["op_name"]
        count = macs(op, args.get("input_type_shape", []), args.get("output_type_shape", []))
        if count is None:
            name, count = f"{op}, weights not profiled (time only)", 0
        elif count:
            name = "int8 matrix (MAC)" if op in INTEGER else "float matrix (MAC)"
        else:
            name, count = (
                "everything else (elements)",
                int(sum(np.prod(_shape(o)) for o in args.get("output_type_shape", []))),
            )
        work[name]["us"] += n["dur"]
        work[name]["amount"] += count
    return [
        {
            "bucket": name,
            "per_audio_s": w["amount"] / audio_s,
            "share": w["us"] / total_us,
            "kernel_s_per_audio_s": w["us"] / 1e6 / audio_s,
            "rate_per_s": w["amount"] / (w["us"] / 1e6) if w["us"] else 0.0,
        }
        for name, w in sorted(work.items())
    ]


def peaks(repeat: int) -> dict[str, float]:
    """float32 FLOP/s of numpy's BLAS and 8-bit op/s of ONNX Runtime's ``MatMulInteger`` (one MAC = 2 ops),
    on 2048 x 2048 matrices, best of ``repeat``."""
    from onnx import TensorProto, helper, numpy_helper

    n = 2048
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    a @ b
    fp32 = min(_timed(lambda: a @ b) for _ in range(repeat))
    weights = numpy_helper.from_array(rng.integers(-127, 127, (n, n), dtype=np.int8), "B")
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["A", "B"], ["Y"])], "q",
        [helper.make_tensor_value_info("A", TensorProto.UINT8, [n, n])],
        [helper.make_tensor_value_info("Y", TensorProto.INT32, [n, n])], [weights],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = ort.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    x = rng.integers(0, 255, (n, n), dtype=np.uint8)
    session.run(None, {"A": x})
    int8 = min(_timed(lambda: session.run(None, {"A": x})) for _ in range(repeat))
    return {"fp32_flops": 2 * n**3 / fp32, "int8_ops": 2 * n**3 / int8}


def _timed(run: Any) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def measure(
    engine: KokoroEngine, decoders: dict[str, tuple[bytes, tuple[str, ...]]], front: bytes
) -> dict[str, Any]:
    """The front on one 60-token piece, and each decoder graph on that piece's full 40-frame windows."""
    split = engine.split
    assert split is not None
    spec = engine.parse_voice("af_heart")
    piece = engine.planner.plan(PIECE_60, "en-us")[0]
    feeds, style = engine.feeds(piece.tokens, engine.style_pack(spec), 1.0)
    feats = split.features(feeds)
    frames = split.frames(feats)
    windows = [
        split.decoder_feeds(feats, style, a, a + 48, engine.voice_stats("af_heart"), 0.5)
        for a in range(0, frames - 48 + 1, 40)
    ]
    window_audio_s = 40 * 600 / SAMPLE_RATE * len(windows)
    nodes = profile(front, [feeds])
    rows = [{"graph": "front", **b} for b in buckets(nodes, frames * 600 / SAMPLE_RATE)]
    ops = [{"graph": "front", **o} for o in operators(nodes, 1)]
    for name, (graph, disabled) in decoders.items():
        nodes = profile(graph, windows, disabled)
        rows += [{"graph": f"decoder, {name}", **b} for b in buckets(nodes, window_audio_s)]
        ops += [{"graph": f"decoder, {name}", **o} for o in operators(nodes, len(windows))]
    return {"frames": frames, "windows": len(windows), "rows": attribute_prepacked(rows), "operators": ops}


def operators(nodes: list[dict[str, Any]], calls: int, top: int = 10) -> list[dict[str, Any]]:
    """ONNX Runtime's per-operator profile: each operator's share of kernel time and nodes run per call,
    the ``top`` by time."""
    time_us: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for n in nodes:
        time_us[n["args"]["op_name"]] += n["dur"]
        count[n["args"]["op_name"]] += 1
    total = sum(time_us.values())
    ranked = sorted(time_us, key=lambda op: -time_us[op])[:top]
    return [{"op": op, "share": time_us[op] / total, "nodes_per_call": count[op] / calls} for op in ranked]


def attribute_prepacked(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """ONNX Runtime's profile does not show ``QLinearConv``'s pre-packed weights, so its work is the exported
    decoder's 8-bit convolutions (the same convolutions on the same shapes) less what the static graph runs in
    float instead (``conv_post``): the float MACs it has beyond the exported graph's."""
    by = {(r["graph"], r["bucket"]): r for r in rows}
    exported_int8 = by.get(("decoder, exported", "int8 matrix (MAC)"))
    exported_float = by.get(("decoder, exported", "float matrix (MAC)"))
    for r in rows:
        if not r["bucket"].startswith("QLinearConv") or exported_int8 is None or exported_float is None:
            continue
        moved = by[(r["graph"], "float matrix (MAC)")]["per_audio_s"] - exported_float["per_audio_s"]
        amount = exported_int8["per_audio_s"] - moved
        r["bucket"] = "int8 matrix (MAC; QLinearConv, counted from the exported graph)"
        r["per_audio_s"] = amount
        r["rate_per_s"] = amount / r["kernel_s_per_audio_s"] if r["kernel_s_per_audio_s"] else 0.0
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from streamvoice.engine.static_int8 import static_decoder
    from streamvoice.engine.surgery.graph_split import split_model

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3, help="timings of each peak (best kept)")
    args = parser.parse_args(argv)
    engine = KokoroEngine.load(None, "int8")
    prepare(engine)
    graphs = split_model(engine.files.model)
    decoders: dict[str, tuple[bytes, tuple[str, ...]]] = {"exported": (graphs.decoder, ())}
    derived = static_decoder.find(engine.files.model)
    if derived is not None:
        decoders["static int8"] = (derived.read_bytes(), static_decoder.DISABLED_OPTIMIZERS)
    else:
        print("no static-int8 decoder derived yet (streamvoice models derive): the exported graph only")
    measured = measure(engine, decoders, graphs.front)
    peak = peaks(args.repeat)
    for row in measured["rows"]:
        matching = peak["int8_ops"] if row["bucket"].startswith("int8") else peak["fp32_flops"]
        row["of_peak"] = 2 * row["rate_per_s"] / matching if "MAC" in row["bucket"] else None
        if row["bucket"].startswith("int8 matrix (MAC; QLinearConv"):
            row["of_peak"] = 2 * row["rate_per_s"] / peak["int8_ops"]
    columns = [
        ("graph", "graph"),
        ("bucket", "work"),
        ("per_audio_s", "per audio second"),
        ("share", "share of kernel time"),
        ("rate_per_s", "per second of its kernels"),
        ("of_peak", "of the machine's peak"),
    ]
    print(table(measured["rows"], columns))
    print(table(measured["operators"], [("graph", "graph"), ("op", "operator"), ("share", "share"),
                                        ("nodes_per_call", "nodes per call")]))  # fmt: skip
    print(f"peaks: float32 {peak['fp32_flops'] / 1e9:.0f} GFLOP/s, int8 {peak['int8_ops'] / 1e9:.0f} GOP/s")
    data = {"machine": machine(), **measured, "peaks": peak}
    print("wrote", write_result("limits", data))
    return data


def report(d: dict[str, Any]) -> str:
    p = d["peaks"]
    rows = [
        [r["graph"], r["bucket"], f"{r['per_audio_s'] / 1e9:.2f} G", md_value(r["share"], 2),
         f"{r['rate_per_s'] / 1e9:.1f} G/s", md_value(r["of_peak"], 3) if r["of_peak"] is not None else "-"]
        for r in d["rows"]
    ]  # fmt: skip
    op_rows = [
        [o["graph"], f"`{o['op']}`", md_value(o["share"], 3), f"{o['nodes_per_call']:.0f}"]
        for o in d.get("operators", [])
    ]
    return (
        f"One 60-token piece ({d['frames']} frames) through the front, and its {d['windows']} full 40-frame "
        "windows (4 frames of context each side) through each decoder graph; counts per second of audio. "
        f"Measured peaks: float32 {p['fp32_flops'] / 1e9:.0f} GFLOP/s (numpy's BLAS, 2048 x 2048), 8-bit "
        f"{p['int8_ops'] / 1e9:.0f} GOP/s (ONNX Runtime's MatMulInteger, u8 x s8); a MAC is two operations.\n\n"
        + md_table(
            [
                "graph",
                "work",
                "per audio second",
                "share of kernel time",
                "rate while running",
                "of the machine's peak",
            ],
            rows,
        )
        + "\n\nWhere each graph's kernel time goes, by operator (ONNX Runtime's profile; the ten slowest):\n\n"
        + md_table(["graph", "operator", "share of kernel time", "nodes per call"], op_rows)
    )


if __name__ == "__main__":
    main()
