"""The decoder as static int8: ONNX Runtime's ``QLinearConv`` kernels instead of the exported ``ConvInteger``.

The official int8 file quantizes the decoder's convolutions dynamically: each call measures its activations'
range and runs ``ConvInteger``, ONNX Runtime's generic integer path (~60% of a decoder call on this CPU).
Static int8 fixes each activation's range beforehand, so ONNX Runtime fuses the QDQ pairs into
``QLinearConv``, which has MLAS kernels for AVX-512 VNNI and AVX2; the weights are signed per output channel,
in 7 bits (``quantize`` says why). The graph is derived here from the official file (nothing new is downloaded):

1. the decoder is split off as the engine splits it (prior-statistics norms, batch dimension);
2. its dynamic-int8 convolutions become float ``Conv`` on the file's own dequantized weights, and its
   elementwise chains are rewritten into fewer passes (``graph_fusion``: the same function, the snakes'
   sine squared as a polynomial within 2.3e-5);
3. activation ranges are the ones shipped for the official file (``ranges/``), so every machine derives
   the same graph and speaks the same audio. Measured (issue #66): the ranges measured here depend on the
   voice statistics the engine holds when it derives (the calibration windows are normalised with them):
   on one machine, the graph derived in an empty home (statistics calibrated afresh) differed from the one
   derived beside the statistics cache in 181 of its 931 scales and zero points, up to 8% (median 0.8%), so
   a listener (and the heard tests) heard a different voice depending on where and when it was derived.
   For another file they are measured here as they were measured for the shipped ones (``streamvoice
   models derive --ranges-out`` writes them): on every full window of ten voices in the nine languages, the
   99.999th percentile of each tensor's magnitude (on the seven voices the graph serves worst, PESQ
   against the exported graph 3.51 on average, lowest 3.22; 99.99th: 3.47 / 2.85; 99.9999th: 3.31 / 3.03;
   99.9th: 2.53 / 2.01), and every convolution but ``conv_post`` (the last, which turns 128 channels into
   the spectrum: in 8 bits the sound breaks, PESQ 1.4) is quantized. Keeping more of them in float buys
   little (``resblocks.5``: lowest 2.96 for 25% of the gain).

The result is cached beside the model or in the user cache, keyed by the model file's hash and this
module's ``FORMAT``. ``python -m streamvoice.bench.engine`` measures speed and quality against the graph as
exported (per voice, per language); ``python -m streamvoice.bench.static_int8`` compares the candidates.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import logging
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from streamvoice.engine.surgery.graph_fusion import fuse, keep_only_used
from streamvoice.model_files import naming_hash, user_cache_dir

log = logging.getLogger("streamvoice.engine")

FORMAT = 5  # bump when the derivation changes: old files then no longer match
PERCENTILE = 99.999
KEEP_FLOAT = r"conv_post"  # convolutions left in float, by node name
# ONNX Runtime's transformers left out of the static decoder's session. ``NhwcTransformer`` moves
# ``QLinearConv`` to channels-last and pushes the transposes it needs into the norms' ``ReduceMean``s (which
# then reduce over a strided axis) and the elementwise chains; left in NCHW, the decoder's windows ran 3-6%
# faster, interleaved in one run (python -m streamvoice.bench.limits prints both graphs' operator profiles).
DISABLED_OPTIMIZERS = ("NhwcTransformer",)
WINDOW_FRAMES = 40  # calibration windows: the server's steady size
CONTEXT = 4  # frames of context each side, as the server's windows have
# What the ranges are measured on: ten voices, the nine languages, as phonemes (what the engine's G2P makes of
# "The museum opens at nine...", "Please hold while I transfer...", "It was a bright cold day in April...", "El
# tren a Lisboa...", "Le train pour Lisbonne...", "今日はいい天気ですね。", "今天天气很好...", "आज मौसम बहुत
# अच्छा है।", "Il treno per Lisbona...", "O trem para Lisboa..."), so a machine without a language's G2P pack
# derives the same graph.
CALIBRATION = (
    ("af_heart", "ðə mjuzˈiəm ˈOpᵊnz æt nˈIn, ænd tˈʊɹ stˈɑɹt ˈɛvəɹi hˈæf ˈWəɹ ˈæftəɹ ðˈæt tədˈA."),
    ("am_michael", "plˈiz hˈOld wˌIl ˌI tɹˈænsfəɹ jʊɹ kˈɔl tə ðə nˈɛkst əvˈAləbᵊl ˈAʤᵊnt."),
    ("bf_emma", "ˌɪt wɒz ɐ bɹˈIt kˈQld dˈA ɪn ˈApɹɪl, and ðə klˈɒks wɜː stɹˈIkɪŋ θˌɜːtˈiːn."),
    ("ef_dora", "el tɾˈen a lisβˈoa sˈale ðel andˈen kwˈatɾo a las nwˈeβe i ðjˈeθ."),
    ("ff_siwis", "lə tʁˈɛ̃ puʁ lizbˈɔn pˈaʁ dy kˈe kˈatʁ a nˈœv ˈœʁ dˈis."),
    ("jf_alpha", "kʲoː βa iː teŋkʲi desɨ ne."),
    ("zf_xiaobei", "ʨi→ntʰjɛ→ntʰjɛ→nʨʰi↘ xə↓n xau↓, wo↓mən ʨʰy↘ kʊ→ŋɥɛ↗n sa↘npu↘ pa."),
    ("hf_alpha", "ˈaːɟ mˈɔːsəm bˈʌhʊt ˈʌcʰcʰaː hɛː"),
    ("if_sara", "il trˈɛno per lizbˈona pˈarte dal binˈario kwˈatːro."),
    ("pf_dora", "ʊ trˈAŋ pˌaɾæ lˌizbˈoæ sˈI da plˌatafˈɔɾəmæ kwˈatrʊ."),
)


SHIPPED_RANGES = Path(__file__).with_name("ranges")  # activation ranges for the official files, by hash


def cache_name(model: Path) -> str:
    return f"decoder-static-int8-v{FORMAT}-{naming_hash(model)[:16]}.onnx"


def ranges_name(graph_name: str) -> str:
    """The ranges file of a derived graph (``cache_name``'s), without the format: ranges outlive it."""
    return re.sub(r"-v\d+-", "-", graph_name).removesuffix(".onnx") + ".ranges.json"


def shipped_ranges(graph_name: str, folder: Path = SHIPPED_RANGES) -> Path | None:
    """The shipped activation ranges of this derived graph (None: a file no ranges were shipped for)."""
    path = folder / ranges_name(graph_name)
    return path if path.is_file() else None


def ranges_for(graph_name: str, ranges_out: Path | None) -> Path | None:
    """Where a derivation's ranges come from: the shipped ones (None: none shipped, so measured and not
    kept), or, with ``ranges_out``, a file there they are measured into afresh (the decoder's and the
    front's derivation alike)."""
    if ranges_out is None:
        return shipped_ranges(graph_name)
    path = ranges_out / ranges_name(graph_name)
    path.unlink(missing_ok=True)
    return path


def find(model: Path, name: str | None = None) -> Path | None:
    """The derived decoder (or the graph cached as ``name``) for this model file, beside it or in the user
    cache (None: not derived yet); ``name`` saves hashing the 92 MB model again."""
    name = name or cache_name(model)
    for folder in (model.parent, user_cache_dir()):
        if (folder / name).is_file():
            return folder / name
    return None


class WindowSource(Protocol):
    def decoder_windows(
        self, said: tuple[tuple[str, str], ...], frames: int, context: int
    ) -> list[dict[str, Any]]: ...


def calibration_windows(
    engine: WindowSource, said: tuple[tuple[str, str], ...] = CALIBRATION
) -> list[dict[str, Any]]:
    """What the ranges are measured on: every full window of ``said``, as the server cuts them."""
    return engine.decoder_windows(said, WINDOW_FRAMES, CONTEXT)


def derive_graph(
    decoder: bytes,
    windows: list[dict[str, Any]],
    keep_float: str = KEEP_FLOAT,
    percentile: float = PERCENTILE,
    ranges: Path | None = None,
) -> bytes:
    """The exported decoder graph with its convolutions in static int8, ranges read from ``ranges`` when it
    exists, else measured on ``windows`` (the ``percentile`` of each activation's magnitude) and written
    there when given; convolutions whose names match ``keep_float`` stay float (``bench.static_int8`` tries
    others)."""
    import onnx

    model = onnx.load_from_string(decoder)
    float_weights(model)
    fuse(model)
    convs = [n.name for n in model.graph.node if n.op_type == "Conv"]
    return quantize(
        model,
        windows,
        exclude=[c for c in convs if re.search(keep_float, c)],
        percentile=percentile,
        ranges=ranges,
    )


def quantize(
    model: Any,
    feeds: list[dict[str, Any]],
    op_types: tuple[str, ...] = ("Conv",),
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    percentile: float | None = PERCENTILE,
    ranges: Path | None = None,
) -> bytes:
    """``model`` with its ``op_types`` nodes (only those named in ``include``, when given; none named in
    ``exclude``) in static int8, the QDQ form ONNX Runtime fuses into ``QLinearConv``: s7 weights per output
    channel, u8 activations ranged on ``feeds`` by the ``percentile`` of each one's magnitude (None: its
    minimum and maximum). ``ranges``: a file of ranges read instead of measuring (nothing is run, so the
    graph is the same on every machine), or, when it does not exist yet, where the measured ones are
    written. The static decoder's and front's derivation, and the benchmarks' candidates."""
    import onnx
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    extra: dict[str, Any] = {
        "ActivationSymmetric": False, "WeightSymmetric": True,
        # One feed per pass: the histograms merge, every tensor of a pass is held until it ends (~0.4 GB a
        # decoder window; all at once, 32 windows took ~8 GB), and feeds may differ in length.
        "CalibStridedMinMax": 1,
    }  # fmt: skip
    if percentile is not None:
        extra["CalibPercentile"] = percentile
    # ONNX Runtime's quantizer prints its progress and advises pre-processing (shape inference, which the
    # feeds' dynamic lengths make moot): neither is for a server's log.
    # ``reduce_range``: weights in -64..64, not -127..127. Without VNNI (an AVX2-only CPU) MLAS's u8s8
    # kernels add two u8 x s8 products in 16 bits, which saturate past 32,767 (255 x 127 x 2 = 64,770;
    # 255 x 64 x 2 = 32,640 fits), so in 8 bits such a CPU heard another voice. On an AVX2 AMD EPYC, the 54
    # voices' whole greetings against the same graph computed exactly: 8 bits PESQ 4.21 on average, lowest
    # 3.24 (bf_lily); 7 bits 4.36, lowest 4.16 (the kernels' rounding). Against the exported graph: 8 bits
    # exact (what VNNI computes) 3.79 / 3.15, 8 bits on that CPU 3.75 / 3.04, 7 bits 3.74 / 3.20
    # (docs/benchmarks.md 7e, the sixteenth session; tests/test_static_decoder.py checks the machine it runs on).
    with tempfile.TemporaryDirectory() as folder, contextlib.redirect_stdout(io.StringIO()), quiet_root():
        source, target = Path(folder) / "float.onnx", Path(folder) / "static.onnx"
        onnx.save(model, str(source))
        quantize_static(
            str(source), str(target), CalibrationFeeds(feeds) if feeds else None,  # type: ignore[arg-type]
            quant_format=QuantFormat.QDQ, per_channel=True, activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8, reduce_range=True, op_types_to_quantize=list(op_types),
            nodes_to_quantize=include, nodes_to_exclude=exclude, extra_options=extra,
            calibrate_method=CalibrationMethod.MinMax if percentile is None else CalibrationMethod.Percentile,
            calibration_cache_path=str(ranges) if ranges is not None else None,
        )  # fmt: skip
        return target.read_bytes()


def derive(model: Path, windows: Callable[[], list[dict[str, Any]]], ranges_out: Path | None = None) -> bytes:
    """The static-int8 decoder for ``model`` (its split decoder as exported): with the ranges shipped for
    this file (seconds), else with ranges measured on ``windows()`` (``calibration_windows``; ~85 s on 2
    cores). ``ranges_out``: measure them in any case and write them into this folder (how the shipped ones
    are made)."""
    from streamvoice.engine.surgery.graph_split import split_model

    started = time.perf_counter()
    ranges = ranges_for(cache_name(model), ranges_out)
    measured = ranges is None or not ranges.is_file()
    graph = derive_graph(split_model(model).decoder, windows() if measured else [], ranges=ranges)
    how = "ranges measured on this machine" if measured else f"the shipped ranges {ranges}"
    log.info("derived the static-int8 decoder in %.0f s (%s)", time.perf_counter() - started, how)
    return graph


def save(graph: bytes, model: Path, folder: Path | None = None, name: str | None = None) -> Path:
    """Write a derived graph (the decoder unless ``name``) where ``find`` looks (the user cache unless
    ``folder``)."""
    path = (folder or user_cache_dir()) / (name or cache_name(model))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "wb") as fh:
        fh.write(graph)
    os.replace(tmp, path)  # readers never see half a file
    return path


def prepare(model: Path, windows: Callable[[], list[dict[str, Any]]]) -> tuple[bytes, str]:
    """The derived decoder for ``model``, and where it came from (``prepare_derived``), derived on
    ``windows()`` if it must be."""
    name = cache_name(model)  # hashed once: the lock, the lookup and the save share it
    return prepare_derived(model, name, lambda: derive(model, windows), "static-int8 decoder")


def prepare_derived(model: Path, name: str, make: Callable[[], bytes], what: str) -> tuple[bytes, str]:
    """The graph derived from ``model`` cached as ``name``, and where it came from: the cache, else made now
    and saved (a read-only cache keeps it in memory for this process). Processes starting together derive
    it once: the others wait on a lock beside the cache and then load the file."""
    with _derivation_lock(name):
        found = find(model, name)
        if found is not None:
            return found.read_bytes(), f"loaded {found}"
        log.info("no %s for this model yet: deriving it once", what)
        graph = make()
        try:
            return graph, f"derived, saved {save(graph, model, name=name)}"
        except OSError as exc:
            log.warning("could not save the %s (%s); it is derived again next start", what, exc)
            return graph, "derived (not saved)"


@contextlib.contextmanager
def _derivation_lock(name: str) -> Iterator[None]:
    path = user_cache_dir() / (name + ".lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = path.open("w")
    except OSError:  # a read-only cache: nothing to share, nothing to lock
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


@contextlib.contextmanager
def quiet_root() -> Iterator[None]:
    """ONNX Runtime's quantizer advises pre-processing on the root logger: not for a server's log."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


class CalibrationFeeds:
    """ONNX Runtime's calibration data reader over a list of feeds, whole or in strides (``set_range``): the
    static decoder's derivation and the benchmarks' candidates (``bench.static_int8``, ``bench.front_int8``)."""

    def __init__(self, feeds: list[dict[str, Any]]) -> None:
        self._feeds = feeds
        self._it = iter(feeds)

    def __len__(self) -> int:
        return len(self._feeds)

    def set_range(self, start_index: int, end_index: int) -> None:
        self._it = iter(self._feeds[start_index:end_index])

    def get_next(self) -> dict[str, Any] | None:
        return next(self._it, None)


def float_weights(model: Any, only: str | None = None) -> int:
    """Replace each dynamically quantized Conv/MatMul chain (``only``: those whose node names match that
    pattern) by its float op on the dequantized weights."""
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
        if n.op_type not in ("ConvInteger", "MatMulInteger") or (only and not re.search(only, n.name)):
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
    keep_only_used(g, nodes)
    return len(replaced)


def float_lstms(model: Any) -> int:
    """Each ``DynamicQuantizeLSTM`` (a CPU-only contrib op of the int8 file; the fp32 file has plain LSTMs) as
    an ``LSTM`` on its dequantized weights, which the CUDA provider runs on the GPU."""
    from onnx import helper, numpy_helper

    g = model.graph
    inits = {i.name: i for i in g.initializer}

    def dequantized(q: str, scale: str, zero: str) -> np.ndarray[Any, np.dtype[np.float32]]:
        w = numpy_helper.to_array(inits[q]).astype(np.float32)  # [directions, inputs, 4 * hidden]
        s, z = (numpy_helper.to_array(inits[name]).astype(np.float32) for name in (scale, zero))
        shape = (-1, 1, 1) if s.ndim == 1 else (s.shape[0], 1, s.shape[-1])  # per direction or channel
        return ((w - z.reshape(shape)) * s.reshape(shape)).transpose(0, 2, 1)  # LSTM's [dir, 4h, inputs]

    nodes, count = [], 0
    for n in g.node:
        if n.op_type != "DynamicQuantizeLSTM":
            nodes.append(n)
            continue
        x, w, r, b, lengths, h0, c0, peep, w_scale, w_zero, r_scale, r_zero = (list(n.input) + [""] * 12)[:12]
        names = (n.name + "/float_W", n.name + "/float_R")
        g.initializer.extend(
            [
                numpy_helper.from_array(dequantized(w, w_scale, w_zero), names[0]),
                numpy_helper.from_array(dequantized(r, r_scale, r_zero), names[1]),
            ]
        )
        inputs = [x, *names, b, lengths, h0, c0, peep]
        while not inputs[-1]:
            inputs.pop()
        lstm = helper.make_node("LSTM", inputs, list(n.output), name=n.name + "/float")
        lstm.attribute.extend(n.attribute)
        nodes.append(lstm)
        count += 1
    keep_only_used(g, nodes)
    return count
