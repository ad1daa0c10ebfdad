"""The static-int8 decoder (``engine.static_decoder``): derived from the official file, cached by its hash,
selected by ``int8-static``, and the same speech as the graph as exported. Its speed and the judgement on
every voice and language are ``python -m streamvoice.bench.engine``'s (a benchmark, not a test's clock)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from streamvoice.bench.quality import pesq_score
from streamvoice.engine import KokoroEngine
from streamvoice.engine.static_int8 import static_decoder
from streamvoice.engine.surgery.graph_split import split_model
from streamvoice.model_files import resolve_model_files

SENTENCE = "Your package left our warehouse on Monday and is now with the courier."


@pytest.fixture(scope="module")
def derived(engine: KokoroEngine) -> bytes:
    """Derived as ``streamvoice models derive`` does, on one window of one of its ten calibration sentences
    (each window costs the quantizer's calibration ~4 s of CPU here): the derivation's shape. What it sounds
    like is judged on the shipped derivation (all ten sentences), the one the session's engine decodes with."""
    windows = static_decoder.calibration_windows(engine, static_decoder.CALIBRATION[:1])[:1]
    return static_decoder.derive_graph(split_model(engine.files.model).decoder, windows)


def test_every_convolution_but_the_last_is_static_int8(derived: bytes) -> None:
    """Each convolution reads a dequantized activation and weight (the QDQ pair ONNX Runtime fuses into
    ``QLinearConv``) except ``conv_post``; nothing is quantized at run time any more."""
    graph = onnx.load_from_string(derived).graph
    produced_by = {o: n.op_type for n in graph.node for o in n.output}
    convs = [n for n in graph.node if n.op_type == "Conv"]
    floating = [n.name for n in convs if produced_by.get(n.input[0]) != "DequantizeLinear"]
    assert not any(n.op_type in ("ConvInteger", "DynamicQuantizeLinear") for n in graph.node)
    assert len(convs) > 60 and len(floating) == 1 and "conv_post" in floating[0]


def test_the_static_decoder_says_what_the_exported_one_says(
    engine: KokoroEngine, exported_engine: KokoroEngine
) -> None:
    """Same front, same phonemes, same voice statistics: the shipped static graph's whole piece sounds like
    the exported graph's (PESQ against it), is as long and audible; its streamed windows are as close to its
    whole piece as the exported graph's are to theirs (windowing alone costs the exported graph PESQ
    ~2.5-2.8: ``bench.quality``), within half a point."""
    static, exported = engine, exported_engine
    assert static.decoder_graph == "static-int8" and exported.decoder_graph == "exported"
    spec = exported.parse_voice("af_heart")
    exported.set_voice_stats("af_heart", static.voice_stats("af_heart"), static.memory.silence(spec))
    piece = exported.planner.plan(SENTENCE, "en-us")[0]
    reference = exported.synthesize_piece(piece, spec, 1.0)
    whole = static.synthesize_piece(piece, spec, 1.0)
    streamed = np.concatenate(list(static.stream_piece(piece, spec, 1.0)))
    reference_streamed = np.concatenate(list(exported.stream_piece(piece, spec, 1.0)))
    assert abs(len(whole) - len(reference)) <= 600 and abs(len(streamed) - len(whole)) <= 600  # trims: levels
    assert np.isfinite(whole).all() and 0.05 < float(np.abs(whole).max()) < 1.0
    assert pesq_score(reference, whole) >= 3.0
    assert pesq_score(whole, streamed) >= pesq_score(reference, reference_streamed) - 0.5


def test_a_decoder_with_other_outputs_is_refused(engine: KokoroEngine) -> None:
    assert engine.split is not None
    front = split_model(engine.files.model).front  # a graph, but not a decoder
    with pytest.raises(RuntimeError, match="outputs differ"):
        engine.split.replace_decoder(front)


def test_the_variant_loads_the_derived_file_by_the_models_hash(
    engine: KokoroEngine, derived: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``int8-static`` (and, on a CPU, no variant at all) finds the derived decoder in the user cache under
    the model file's hash (as ``streamvoice models derive`` writes it) and decodes with it; the int8 variant
    is the file as exported."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    # The official files in a folder of their own: where the suite's model lives (the user cache on a bare
    # machine) already holds the decoder derived at the suite's start, beside the model.
    folder = tmp_path / "model"
    folder.mkdir()
    for official in (engine.files.model, engine.files.voices):
        (folder / official.name).symlink_to(official)
    model = resolve_model_files(folder, "int8-static").model
    assert model == folder / engine.files.model.name and static_decoder.find(model) is None
    path = static_decoder.save(derived, model)
    assert path.parent == tmp_path / "cache" / "streamvoice" / "kokoro-v1.0"
    assert static_decoder.cache_name(model) in path.name and static_decoder.find(model) == path
    loaded = KokoroEngine.load(folder, "int8-static")
    assert loaded.decoder_graph == "static-int8"
    assert KokoroEngine.load(folder).decoder_graph == "static-int8"
    assert KokoroEngine.load(folder, "int8").decoder_graph == "exported"
    audio = loaded.synthesize("Hello there.", "af_heart")
    assert np.isfinite(audio).all() and float(np.abs(audio).max()) > 0.05


def test_without_the_split_decoder_the_variant_is_refused_with_what_to_do(kokoro_dir: Path) -> None:
    from streamvoice.engine.options import EngineError, EngineOptions

    with pytest.raises(EngineError, match="use the int8 variant"):
        KokoroEngine.load(kokoro_dir, "int8-static", EngineOptions(stream_windows=False))


def test_the_shipped_ranges_make_one_graph_wherever_it_is_derived(engine: KokoroEngine) -> None:
    """Issue #66: ranges measured on one machine with and without its voice statistics cache gave graphs
    that differed in 181 scales and zero points (up to 8%): a different voice by where it was derived. The
    official file's ranges are shipped: the derivation reads them and runs no model at all (a calibration
    that were asked for would fail here), so every machine derives the byte-identical graph the session's
    engine decodes with."""
    model = engine.files.model
    name = static_decoder.cache_name(model)
    assert static_decoder.shipped_ranges(name) is not None, "no ranges shipped for the official file"

    def no_calibration() -> list[dict[str, object]]:
        raise AssertionError("the shipped ranges were not used: the derivation asked for calibration windows")

    graph = static_decoder.derive(model, no_calibration)
    in_use = static_decoder.find(model)
    assert in_use is not None and graph == in_use.read_bytes()


def test_its_weights_fit_the_kernels_of_a_cpu_without_vnni(derived: bytes) -> None:
    """Every quantized weight lies in -64..64: two u8 x s8 products then fit the 16 bits an AVX2-only CPU's
    kernels add them in (255 x 64 x 2 = 32,640), where -127..127 saturated (``static_decoder.quantize``)."""
    graph = onnx.load_from_string(derived).graph
    dequantized = {n.input[0] for n in graph.node if n.op_type == "DequantizeLinear"}
    weights = [
        onnx.numpy_helper.to_array(i)
        for i in graph.initializer
        if i.name in dequantized and i.data_type == onnx.TensorProto.INT8 and len(i.dims) == 3
    ]
    assert len(weights) > 60
    assert max(int(np.abs(w.astype(np.int16)).max()) for w in weights) <= 64


@pytest.mark.slow
def test_this_cpu_decodes_what_the_graph_says(engine: KokoroEngine) -> None:
    """What the static decoder says on this CPU, fused into ONNX Runtime's integer kernels, against the same
    graph run node by node (no fusion: quantize, dequantize, float convolution, the exact function a VNNI
    CPU's integer sums give). With 8-bit weights an AVX2-only AMD EPYC heard bf_lily's greeting at PESQ 3.24
    against it; in 7 bits the 54 voices' lowest is 4.16, the kernels' rounding (docs/benchmarks.md 7e)."""
    import onnxruntime as ort

    from streamvoice.engine.greeting import calibration_text

    assert engine.split is not None and engine.decoder_graph == "static-int8"
    found = static_decoder.find(engine.files.model)
    assert found is not None
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    node_by_node = ort.InferenceSession(found.read_bytes(), options, providers=["CPUExecutionProvider"])
    spec = engine.parse_voice("bf_lily")
    piece = engine.planner.plan(calibration_text("en-gb"), "en-gb")[0]
    fused = engine.synthesize_piece(piece, spec, 1.0)
    kernels = engine.split.decoder
    engine.split.decoder = node_by_node
    try:
        exact = engine.synthesize_piece(piece, spec, 1.0)
    finally:
        engine.split.decoder = kernels
    assert len(exact) == len(fused)
    assert pesq_score(exact, fused) >= 4.0
