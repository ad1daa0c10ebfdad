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

Also the log-spectral distance of each variant's audio to the exported graph's (0 dB: identical).

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
from streamvoice.engine.graph_split import split_model

TEXT = "The museum opens at nine, and tours start every half hour after that today, so please come early."
VOICE = "af_heart"
CONTEXT = 4  # frames each side, as the server's windows have


def float_weights(model: Any) -> int:
    """Replace each dynamically quantized Conv/MatMul chain by its float op on dequantized weights."""
    from onnx import helper, numpy_helper

    g = model.graph
    inits = {i.name: i for i in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    consumers: dict[str, list[Any]] = {}
    for n in g.node:
        for name in n.input:
            consumers.setdefault(name, []).append(n)

    def array(name: str) -> np.ndarray[Any, Any]:
        return numpy_helper.to_array(inits[name])

    replaced: dict[int, Any] = {}
    dropped: set[int] = set()
    for n in list(g.node):
        if n.op_type not in ("ConvInteger", "MatMulInteger"):
            continue
        x_q, w_q, _, w_zp = n.input
        quantize = producer[x_q]  # DynamicQuantizeLinear(x) -> x_q, x_scale, x_zp
        chain, bias = [n], None
        while chain[-1].op_type != "Mul":  # [Add int32 bias] -> Cast -> Mul(x_scale * w_scale)
            (nxt,) = consumers[chain[-1].output[0]]
            if nxt.op_type == "Add":  # bias quantized at run time: Reshape(Cast(Floor(Div(bias, scale))))
                other = next(i for i in nxt.input if i != chain[-1].output[0])
                div = producer[producer[producer[producer[other].input[0]].input[0]].input[0]]
                bias = array(div.input[0])
            chain.append(nxt)
        rescale = chain[-1]
        scales = producer[next(i for i in rescale.input if i != chain[-2].output[0])]
        w_scale = array(next(i for i in scales.input if i != quantize.output[1]))
        w = array(w_q).astype(np.float32)
        zero, scale = array(w_zp).astype(np.float32), w_scale.astype(np.float32)
        if n.op_type == "ConvInteger":  # per output channel: the first axis
            shape = (-1,) + (1,) * (w.ndim - 1)
            zero = zero.reshape(shape) if zero.ndim else zero
            scale = scale.reshape(shape) if scale.ndim else scale
        weights = (w - zero) * scale
        w_name = n.name + "/float_weight"
        g.initializer.append(numpy_helper.from_array(weights.astype(np.float32), w_name))
        inputs = [quantize.input[0], w_name]
        if n.op_type == "ConvInteger":
            if bias is not None:
                g.initializer.append(numpy_helper.from_array(bias.astype(np.float32), n.name + "/float_bias"))
                inputs.append(n.name + "/float_bias")
            node = helper.make_node("Conv", inputs, [rescale.output[0]], name=n.name + "/float")
            node.attribute.extend(n.attribute)
        else:
            node = helper.make_node("MatMul", inputs, [rescale.output[0]], name=n.name + "/float")
        replaced[id(n)] = node
        dropped.update(id(c) for c in chain)
    nodes = [replaced.get(id(n), n) for n in g.node if id(n) in replaced or id(n) not in dropped]
    _keep_only_used(g, nodes)
    return len(replaced)


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
    _keep_only_used(g, nodes)
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


def _keep_only_used(graph: Any, nodes: list[Any]) -> None:
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


VARIANTS: dict[str, list[Callable[[Any], int]]] = {
    "int8 (as exported)": [],
    "float weights": [float_weights],
    "float weights, 2-D": [float_weights, as_2d],
    "signed weights": [signed_weights],
}


def main() -> None:
    import onnx

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="12,40,120", help="kept frames per window (25 ms each)")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    engine = KokoroEngine.load()
    engine.warm_up((VOICE,))
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
    print("wrote", write_result("kernels", {"context_frames": CONTEXT, "rows": rows}))


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
    )


if __name__ == "__main__":
    main()
