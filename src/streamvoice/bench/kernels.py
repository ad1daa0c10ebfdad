"""Decoder kernels: what the same decoder costs when ONNX Runtime runs it with other kernels.

The int8 model's convolutions are ``ConvInteger`` with unsigned 8-bit weights, their activations quantized
on the fly (``DynamicQuantizeLinear``); on CPU they are ~2/3 of a decoder call. Three rewrites of the same
decoder graph that could plausibly run faster, each timed against the graph as exported, per window size:

- ``float weights``: every ``ConvInteger``/``MatMulInteger`` (with its quantize, bias and rescale nodes)
  replaced by a float ``Conv``/``MatMul`` on the dequantized weights (the same weights, float activations);
- ``float weights, 2-D``: the same, each 1-D convolution written as a 2-D one of height 1, which is what
  ONNX Runtime's blocked (NCHWc) convolution kernels take;
- ``signed weights``: the weights shifted to signed 8-bit (bit-identical results), the layout the
  VNNI u8 x s8 instructions multiply.

Also the log-spectral distance of each variant's audio to the exported graph's (0 dB: identical), and what
single elementwise operators cost per element on a decoder-sized tensor ([1, 128, 9600]: the last stage of
a 16-frame window), with the snake activation both ways ``graph_fusion`` could write it: with ONNX
Runtime's ``Sin``, or with the polynomial it ships (``graph_fusion.sin_squared_terms``).

Run: ``python -m streamvoice.bench.kernels [--sizes 12,40,120] [--repeat 7]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import onnxruntime as ort

from streamvoice.bench.common import table, write_result
from streamvoice.bench.spectral import log_spectral_distance
from streamvoice.bench.tables import md_table, md_value
from streamvoice.engine import KokoroEngine
from streamvoice.engine.readiness import warm_up
from streamvoice.engine.static_int8.static_decoder import CONTEXT, float_weights
from streamvoice.engine.surgery.graph_fusion import keep_only_used
from streamvoice.engine.surgery.graph_split import split_model

TEXT = "The museum opens at nine, and tours start every half hour after that today, so please come early."
VOICE = "af_heart"


def as_2d(model: Any) -> int:
    """Each float 1-D convolution as a 2-D one of height 1, between an Unsqueeze and a Squeeze."""
    from onnx import helper, numpy_helper

    g = model.graph
    inits = {i.name: i for i in g.initializer}
    g.initializer.append(numpy_helper.from_array(np.array([3], np.int64), "as_2d/axis"))
    nodes, count = [], 0
    for n in g.node:
        weight = inits.get(n.input[1]) if n.op_type == "Conv" else None
        if weight is None or len(weight.dims) != 3:
            nodes.append(n)
            continue
        w = numpy_helper.to_array(weight)
        g.initializer.append(numpy_helper.from_array(w[..., None], n.input[1] + "/2d"))
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        new: dict[str, Any] = {"kernel_shape": [w.shape[2], 1], "group": attrs.get("group", 1)}
        if "pads" in attrs:
            new["pads"] = [attrs["pads"][0], 0, attrs["pads"][1], 0]
        for key in ("strides", "dilations"):
            if key in attrs:
                new[key] = [attrs[key][0], 1]
        x4, y4 = n.name + "/x4", n.name + "/y4"
        nodes.append(helper.make_node("Unsqueeze", [n.input[0], "as_2d/axis"], [x4]))
        nodes.append(helper.make_node("Conv", [x4, n.input[1] + "/2d", *n.input[2:]], [y4], **new))
        nodes.append(helper.make_node("Squeeze", [y4, "as_2d/axis"], [n.output[0]]))
        count += 1
    keep_only_used(g, nodes)
    return count


def signed_weights(model: Any) -> int:
    """ConvInteger weights and their zero points shifted from u8 to s8: the same products."""
    from onnx import numpy_helper

    inits = {i.name: i for i in model.graph.initializer}
    done: set[str] = set()
    for n in model.graph.node:
        if n.op_type != "ConvInteger":
            continue
        for name in (n.input[1], n.input[3]):
            a = numpy_helper.to_array(inits[name])
            if name in done or a.dtype != np.uint8:
                continue
            shifted = (a.astype(np.int16) - 128).astype(np.int8)
            inits[name].CopyFrom(numpy_helper.from_array(shifted, name))
            done.add(name)
    return len(done)


VARIANTS: dict[str, list[Callable[[Any], int]]] = {
    "int8 (as exported)": [],
    "float weights": [float_weights],
    "float weights, 2-D": [float_weights, as_2d],
    "signed weights": [signed_weights],
}


ELEMENTS = (1, 128, 9600)


def _snake(with_sin: bool) -> list[Any]:
    """The folded snake ``(w + S(w)) * k`` on an input ``x`` (``w = x * a + b``), ``S`` by ``Sin`` or polynomial."""
    from onnx import helper

    from streamvoice.engine.surgery.graph_fusion import SIN2_POLYNOMIAL, sin_squared_terms

    w = [helper.make_node("Mul", ["x", "a"], ["xa"]), helper.make_node("Add", ["xa", "b"], ["w"])]
    if with_sin:
        square = [helper.make_node("Sin", ["w"], ["sin"]), helper.make_node("Mul", ["sin", "sin"], ["s2"])]
    else:
        square = sin_squared_terms([f"c{i}" for i in range(len(SIN2_POLYNOMIAL))], "w", "s2")
    return [
        *w,
        *square,
        helper.make_node("Add", ["w", "s2"], ["sum"]),
        helper.make_node("Mul", ["sum", "k"], ["y"]),
    ]


def elementwise(repeat: int) -> list[dict[str, Any]]:
    """ns per element of single operators and of the snake both ways, 2 threads, idle threads asleep."""
    from onnx import TensorProto, helper, numpy_helper

    from streamvoice.engine.surgery.graph_fusion import SIN2_POLYNOMIAL

    constants = {"a": 0.7, "b": 0.1, "k": 1.3}
    constants |= {f"c{i}": c / np.pi for i, c in enumerate(SIN2_POLYNOMIAL)}
    graphs = {
        "Mul": [helper.make_node("Mul", ["x", "x"], ["y"])],
        "Add": [helper.make_node("Add", ["x", "x"], ["y"])],
        "Round": [helper.make_node("Round", ["x"], ["y"])],
        "Sin": [helper.make_node("Sin", ["x"], ["y"])],
        f"snake with Sin ({len(_snake(True))} nodes)": _snake(True),
        f"snake with the polynomial ({len(_snake(False))} nodes)": _snake(False),
    }
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    x = np.random.default_rng(0).normal(0, 3, ELEMENTS).astype(np.float32)
    rows = []
    for name, nodes in graphs.items():
        used = {i for n in nodes for i in n.input}
        graph = helper.make_graph(
            nodes, "elementwise",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(ELEMENTS))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(ELEMENTS))],
            [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in constants.items() if k in used],
        )  # fmt: skip
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        session.run(None, {"x": x})
        times = []
        for _ in range(repeat * 5):
            started = time.perf_counter()
            session.run(None, {"x": x})
            times.append(time.perf_counter() - started)
        rows.append({"op": name, "ns_per_element": statistics.median(times) / x.size * 1e9})
    return rows


def main() -> None:
    import onnx

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="12,40,120", help="kept frames per window (25 ms each)")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    engine = KokoroEngine.load()
    warm_up(engine, (VOICE,))
    split = engine.split
    assert split is not None
    spec = engine.parse_voice(VOICE)
    piece = engine.planner.plan(TEXT, engine.resolve_lang(spec, None))[0]
    feeds, style = engine.feeds(piece.tokens, engine.style_pack(spec), 1.0)
    feats = split.features(feeds)
    prior = engine.voice_stats(VOICE)
    assert prior is not None

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    graph = split_model(engine.files.model).decoder
    sizes = [int(s) for s in args.sizes.split(",")]
    reference: dict[int, np.ndarray[Any, Any]] = {}
    base_ms: dict[int, float] = {}
    rows: list[dict[str, Any]] = []
    for variant, rewrites in VARIANTS.items():
        model = onnx.load_from_string(graph)
        for rewrite in rewrites:
            rewrite(model)
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        output = session.get_outputs()[0].name
        for size in sizes:
            feeds_ = split.decoder_feeds(feats, style, 8, 8 + size + 2 * CONTEXT, prior, 0.5)
            audio = np.asarray(session.run([output], feeds_)[0], dtype=np.float32).reshape(-1)
            times = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                session.run([output], feeds_)
                times.append(time.perf_counter() - started)
            ms = statistics.median(times) * 1000
            base_ms.setdefault(size, ms)
            reference.setdefault(size, audio)
            rows.append(
                {
                    "variant": variant,
                    "window_frames": size,
                    "ms": ms,
                    "vs_exported": ms / base_ms[size],
                    "lsd_db": log_spectral_distance(reference[size], audio),
                }
            )
            print(f"{variant}, {size} frames: {ms:.0f} ms", flush=True)
    print()
    columns = [
        ("variant", "decoder graph"),
        ("window_frames", "window (frames)"),
        ("ms", "ms/window"),
        ("vs_exported", "time vs exported"),
        ("lsd_db", "LSD vs exported (dB)"),
    ]
    print(table(rows, columns))
    ops = elementwise(args.repeat)
    print()
    print(table(ops, [("op", "elementwise"), ("ns_per_element", "ns per element")]))
    print("wrote", write_result("kernels", {"context_frames": CONTEXT, "rows": rows, "elementwise": ops}))


def report(d: dict[str, Any]) -> str:
    rows = [
        [
            r["variant"],
            str(r["window_frames"]),
            md_value(r["ms"], 1),
            md_value(r["vs_exported"], 2),
            md_value(r["lsd_db"], 2),
        ]
        for r in d["rows"]
    ]
    return (
        f"One decoder call per window ({d['context_frames']} frames of context each side), median time, "
        "for rewrites of the same decoder graph, and the spectral distance of their audio to the "
        "graph as exported.\n\n"
        + md_table(
            ["decoder graph", "window (frames)", "ms per window", "time vs exported", "LSD vs exported dB"],
            rows,
        )
        + elementwise_report(d.get("elementwise", []))
    )


def elementwise_report(ops: list[dict[str, Any]]) -> str:
    if not ops:  # a result from before the elementwise rows
        return ""
    return (
        f"\n\nElementwise operators on a [{', '.join(map(str, ELEMENTS))}] float tensor (2 threads), median:\n\n"
        + md_table(["operator", "ns per element"], [[r["op"], md_value(r["ns_per_element"], 2)] for r in ops])
    )


if __name__ == "__main__":
    main()
