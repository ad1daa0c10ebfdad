"""Kokoro on a GPU: how many real-time listeners one GPU keeps fed, with the decoder's windows batched.

Needs ONNX Runtime with its CUDA provider (``onnxruntime-gpu``) and a CUDA GPU. In one process:

1. The float graph. The CUDA provider has no kernel for the int8 file's ``ConvInteger``, so a GPU runs the
   float graph: the official fp32 file when the folder holds it, else the int8 file with its weights
   dequantized (``static_decoder.float_weights`` and ``float_lstms`` over the whole graph): the fp32 file's
   graph and arithmetic with the int8 file's weights, written to a temporary folder beside the voices.
2. The bare engine, one call after another: kokoro-onnx's ``create()`` on that file (its own session, CUDA
   first) and our engine's whole pieces.
3. cuDNN's convolution algorithm search, exhaustive against heuristic (``options.CUDA_PROVIDER_OPTIONS``):
   a decoder window's first call at a new shape, and its steady cost.
4. Batched decoder windows: one call for 1..``--max-batch`` windows of one size (``bench.batching.cost``).
5. CUDA graphs: a window's decoder call replayed as one captured graph (``enable_cuda_graph``) against
   the same call launched node by node, both bound on the GPU (IO binding), per batch size: what the
   launches of its ~1,900 nodes cost, and the host copies a served call adds.
6. Where the time goes: ONNX Runtime's profiler on a front call, a window and a whole piece, per operator
   and the provider that ran it (what is left on the CPU shows here).
7. ``--audio FILE``: ``bench.batching``'s sentences on the GPU (whole, streamed alone, streamed four at once
   through the batcher) with their phoneme tokens, for ``--score FILE`` on a machine with Whisper and PESQ
   (the CPU machine): words heard, and PESQ of each against the CPU's rendition of the same (``render``).
8. The served path (``bench.capacity``): K listeners joining ``--stagger`` s apart, each played by a
   real-time player; up to ``--batch`` windows per decoder call (``deadline-batch``), then one
   (``deadline``); the listeners kept fed and the audio per second at saturation.

G2P runs on the CPU: without misaki's English pack (not carried to the device machine) English is read by
espeak, which changes the words' phonemes, not the model's work per second of audio.

Run (GPU): ``python -m streamvoice.bench.gpu --audio results/gpu_audio.npz``; then (CPU):
``python -m streamvoice.bench.gpu --score results/gpu_audio.npz``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray

from streamvoice.bench import batching, capacity
from streamvoice.bench.capacity_runs import kokoro_onnx_limit, single_call_limit
from streamvoice.bench.common import RESULTS_DIR, table, write_result
from streamvoice.bench.tables import md_table, md_value
from streamvoice.engine import KokoroEngine
from streamvoice.engine.options import CUDA_PROVIDER_OPTIONS, EngineOptions, session_providers
from streamvoice.engine.readiness import warm_up
from streamvoice.engine.streaming.decode_batcher import stack_rows
from streamvoice.engine.streaming.windows import WindowPlan
from streamvoice.engine.surgery import cuda_graph
from streamvoice.engine.surgery.graph_split import SplitGraphs, split_model
from streamvoice.model_files import VARIANTS, ModelFiles, resolve_model_files, verify_model_files

CUDA = ("CUDAExecutionProvider", "CPUExecutionProvider")
FLOAT_NAME = "kokoro-v1.0.float-from-int8.onnx"  # not a release name: ``verify_model_files`` leaves it be
SEARCH_SIZES = (12, 24, 40)  # kept frames; + 8 of context
CAPTURE_BATCHES = (1, 4, 16)
# ONNX Runtime's cuDNN algorithm choice: timing every algorithm (its default), cuDNN's heuristic, or no choice
# (implicit precomputed GEMM); a windowed decoder meets a new shape call after call, each a first call.
SEARCH_MODES = ("EXHAUSTIVE", "HEURISTIC", "DEFAULT")
STEPS = ("limits", "search", "cost", "captured", "profile", "audio", "served")


def float_files(model_dir: Path | None, work: Path, lstms: bool = True) -> tuple[ModelFiles, str]:
    """The float graph for a GPU and where it came from (``lstms``: the LSTMs in float too)."""
    import onnx

    from streamvoice.engine.static_int8.static_decoder import float_lstms, float_weights

    files = resolve_model_files(model_dir)
    verify_model_files(files)
    fp32 = files.model.parent / VARIANTS["fp32"]
    if fp32.is_file():
        return ModelFiles(fp32, files.voices), "the official fp32 file"
    model = onnx.load(str(files.model))
    replaced = float_weights(model)
    lstm_count = float_lstms(model) if lstms else 0
    out = work / FLOAT_NAME
    onnx.save(model, str(out))
    voices = work / files.voices.name
    voices.symlink_to(files.voices.resolve())
    return ModelFiles(out, voices), (
        f"the int8 file, its {replaced} quantized Conv/MatMul and {lstm_count} LSTMs dequantized to float"
    )


def conv_search(engine: KokoroEngine, graphs: SplitGraphs, repeat: int) -> list[dict[str, Any]]:
    """A decoder window's first call at each new size and its median after, per cuDNN search mode."""
    split = engine.split
    assert split is not None
    feats, style = batching._features(engine, *batching.SENTENCES[0])
    graph = cuda_graph.for_cuda(graphs.decoder)
    so = EngineOptions().session_options()
    rows = []
    for mode in SEARCH_MODES:
        session = ort.InferenceSession(
            graph, sess_options=so, providers=[("CUDAExecutionProvider", {"cudnn_conv_algo_search": mode})]
        )
        outputs = [o.name for o in session.get_outputs()]
        for size in SEARCH_SIZES:
            feeds = split.decoder_feeds(feats, style, 8, 8 + size + 2 * batching.CONTEXT)
            times = []
            for _ in range(repeat + 1):
                started = time.perf_counter()
                session.run(outputs, feeds)
                times.append((time.perf_counter() - started) * 1000)
            rows.append(
                {
                    "search": mode,
                    "window_frames": size,
                    "first_ms": times[0],
                    "steady_ms": statistics.median(times[1:]),
                }
            )
            print(
                f"cudnn search {mode}, window {size}: first {times[0]:.1f} ms, then {rows[-1]['steady_ms']:.2f} ms",
                flush=True,
            )
    return rows


def captured_windows(
    engine: KokoroEngine, graphs: SplitGraphs, repeat: int, providers: tuple[str, ...] = CUDA
) -> list[dict[str, Any]]:
    """A 24-frame window's decoder call per batch size, bound on the device: launched node by node, then
    replayed as one captured CUDA graph; each also with the host copies a served call makes (every input in,
    the audio out). A mode that fails keeps its error: the graph must have no node a capture cannot hold."""
    split = engine.split
    assert split is not None
    feats, style = batching._features(engine, *batching.SENTENCES[0])
    graph = cuda_graph.for_cuda(graphs.decoder)
    device = "cuda" if providers[0] == "CUDAExecutionProvider" else "cpu"
    modes = ("launched", "captured") if device == "cuda" else ("launched",)
    rows = []
    for batch in CAPTURE_BATCHES:
        computed = 24 + 2 * batching.CONTEXT
        feeds = stack_rows([split.decoder_feeds(feats, style, 8 + k, 8 + k + computed) for k in range(batch)])
        row: dict[str, Any] = {"window_frames": 24, "batch": batch}
        reference: list[NDArray[Any]] | None = None
        for mode in modes:
            try:
                ms, copied_ms, outputs = _bound_calls(
                    graph, feeds, providers, device, mode == "captured", repeat
                )
            except Exception as exc:  # the error is the finding (a node the capture cannot hold)
                row[f"{mode}_error"] = " ".join(str(exc).split())[:400]
                print(f"window x{batch}, {mode}: {row[f'{mode}_error']}", flush=True)
                continue
            row[f"{mode}_ms"], row[f"{mode}_copied_ms"] = ms, copied_ms
            if reference is None:
                reference = outputs
            else:
                row["max_abs_difference"] = float(np.max(np.abs(outputs[0] - reference[0])))
            print(f"window x{batch}, {mode}: {ms:.2f} ms, with host copies {copied_ms:.2f} ms", flush=True)
        rows.append(row)
    return rows


def _bound_calls(
    graph: bytes,
    feeds: dict[str, NDArray[Any]],
    providers: tuple[str, ...],
    device: str,
    capture: bool,
    repeat: int,
) -> tuple[float, float, list[NDArray[Any]]]:
    """Median ms of a call with inputs and outputs bound on ``device``, without and with the host copies,
    and the outputs (a plain run first gives their shapes: a captured graph writes into fixed buffers)."""
    so = EngineOptions().session_options()
    plain = ort.InferenceSession(graph, sess_options=so, providers=session_providers(providers))
    shapes = plain.run(None, feeds)
    del plain
    options = {**CUDA_PROVIDER_OPTIONS, "enable_cuda_graph": "1"} if capture else None
    chosen = [(providers[0], options), *providers[1:]] if options else session_providers(providers)
    session = ort.InferenceSession(graph, sess_options=so, providers=chosen)
    binding = session.io_binding()
    inputs = {
        name: ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(v), device, 0)
        for name, v in feeds.items()
    }
    for name, value in inputs.items():
        binding.bind_ortvalue_input(name, value)
    outputs = [ort.OrtValue.ortvalue_from_shape_and_type(list(a.shape), a.dtype, device, 0) for a in shapes]
    for meta, value in zip(session.get_outputs(), outputs, strict=True):
        binding.bind_ortvalue_output(meta.name, value)
    for _ in range(3):  # ONNX Runtime captures after its first runs, then replays
        session.run_with_iobinding(binding)
    times, copied = [], []
    for _ in range(repeat * 4):
        started = time.perf_counter()
        session.run_with_iobinding(binding)
        times.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        for name, value in inputs.items():
            value.update_inplace(np.ascontiguousarray(feeds[name]))
        session.run_with_iobinding(binding)
        outputs[0].numpy()
        copied.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), statistics.median(copied), [o.numpy() for o in outputs]


def profile(engine: KokoroEngine, graphs: SplitGraphs, repeat: int) -> list[dict[str, Any]]:
    """Where a front call, a 24-frame decoder window and a whole piece's decoder call spend their time, per
    operator and the provider that ran it (ONNX Runtime's profiler): what is left on the CPU shows here."""
    split = engine.split
    assert split is not None
    spec = engine.parse_voice(batching.SENTENCES[0][0])
    piece = engine.planner.plan(batching.SENTENCES[0][1], engine.resolve_lang(spec, None))[0]
    feeds, style = engine.feeds(piece.tokens, engine.style_pack(spec), 1.0)
    feats = split.features(feeds)
    decoder = cuda_graph.for_cuda(graphs.decoder)
    window = split.decoder_feeds(feats, style, 8, 8 + 24 + 2 * batching.CONTEXT)
    whole = split.decoder_feeds(feats, style, 0, split.frames(feats))
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        for call, graph, inputs in (("front", graphs.front, feeds), ("decoder, 24-frame window", decoder, window),
                                    ("decoder, whole piece", decoder, whole)):  # fmt: skip
            so = EngineOptions().session_options()
            so.enable_profiling = True
            so.profile_file_prefix = str(Path(folder) / "profile")
            session = ort.InferenceSession(graph, sess_options=so, providers=session_providers(CUDA))
            outputs = [o.name for o in session.get_outputs()]
            for _ in range(3):
                session.run(outputs, inputs)
            times = []
            for _ in range(repeat):
                started = time.perf_counter()
                session.run(outputs, inputs)
                times.append((time.perf_counter() - started) * 1000)
            events = json.loads(Path(session.end_profiling()).read_text())
            runs = sum(1 for e in events if e.get("cat") == "Session" and e.get("name") == "model_run")
            ops: dict[tuple[str, str], list[float]] = {}
            for e in events:
                if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
                    key = (e["args"].get("op_name", "?"), e["args"].get("provider", "?"))
                    ops.setdefault(key, []).append(e["dur"] / 1000 / runs)
            top = sorted(ops.items(), key=lambda kv: -sum(kv[1]))
            rows.append(
                {
                    "call": call,
                    "ms": statistics.median(times),
                    "ops": [
                        {"op": op, "provider": prov, "ms": sum(d), "nodes": len(d) // runs}
                        for (op, prov), d in top
                    ],
                    "cpu_ms": sum(sum(d) for (_, prov), d in ops.items() if prov == "CPUExecutionProvider"),
                }
            )
            print(
                f"{call}: {rows[-1]['ms']:.1f} ms, of which on the CPU {rows[-1]['cpu_ms']:.1f} ms",
                flush=True,
            )
    return rows


def render(engine: KokoroEngine) -> dict[str, NDArray[Any]]:
    """``bench.batching``'s sentences: their tokens, whole pieces, streamed alone (24-frame windows) and
    streamed all at once through the batcher, in that order (the voices' remembered statistics evolve the
    same way wherever this runs, so renditions on two machines are comparable one to one)."""
    split = engine.split
    assert split is not None
    plan = WindowPlan(first=24, second=24, growth=1.0, largest=24)
    out: dict[str, NDArray[Any]] = {}
    for voice, text in batching.SENTENCES:
        spec = engine.parse_voice(voice)
        tokens = [t for p in engine.planner.plan(text, engine.resolve_lang(spec, None)) for t in p.tokens]
        out[f"{voice}/tokens"] = np.asarray(tokens, dtype=np.int64)
        feeds, style = engine.feeds(tokens, engine.style_pack(spec), 1.0)
        out[f"{voice}/whole"] = split.whole(split.features(feeds), style)[0]
    alone: dict[str, NDArray[np.float32]] = {}
    for voice, text in batching.SENTENCES:
        batching._stream(engine, voice, text, plan, alone)
    together, _ = batching.stream_together(engine, plan)
    for voice in alone:
        out[f"{voice}/alone"], out[f"{voice}/batched"] = alone[voice], together[voice]
    return out


def score(path: Path, lstms: bool = True) -> list[dict[str, Any]]:
    """What the GPU's audio sounds like: Whisper's words against the text, and PESQ of each rendition against
    the CPU's of the same float graph, rendered the same way (``render``); the CPU reads English with espeak,
    as the device did, so both decode the same tokens (``same_tokens`` says so)."""
    from streamvoice.bench.asr import Transcriber
    from streamvoice.bench.quality import pesq_score
    from streamvoice.bench.wer import word_error_rate

    gpu = np.load(path)
    with tempfile.TemporaryDirectory() as work:
        files, _ = float_files(None, Path(work), lstms)
        engine = KokoroEngine(files, EngineOptions(providers=("CPUExecutionProvider",), english_g2p="espeak"))
        warm_up(engine, tuple(voice for voice, _ in batching.SENTENCES))
        cpu = render(engine)
    asr = Transcriber.load()
    rows = []
    for voice, text in batching.SENTENCES:
        row: dict[str, Any] = {
            "voice": voice,
            "same_tokens": gpu[f"{voice}/tokens"].tolist() == cpu[f"{voice}/tokens"].tolist(),
        }
        for kind in ("whole", "alone", "batched"):
            row[f"wer_{kind}"] = word_error_rate(text, asr.transcribe(gpu[f"{voice}/{kind}"], language="en"))
            row[f"pesq_{kind}"] = pesq_score(cpu[f"{voice}/{kind}"], gpu[f"{voice}/{kind}"])
        rows.append(row)
        print(row, flush=True)
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model-dir", type=Path, default=None, help="default: as `serve` finds it")
    parser.add_argument("--ks", default="4,8,16,32", help="listener counts for the served path")
    parser.add_argument("--stagger", type=float, default=0.1, help="seconds between listeners joining")
    parser.add_argument("--options", default="deadline-batch,deadline", help="bench.capacity's options")
    parser.add_argument("--batch", type=int, default=16, help="windows per decoder call (deadline-batch)")
    parser.add_argument("--max-batch", type=int, default=16, help="largest batch of the window cost table")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--audio", type=Path, default=None, help="save the GPU's audio here for --score")
    parser.add_argument("--steps", default=",".join(STEPS), help=f"any of {', '.join(STEPS)}")
    parser.add_argument(
        "--served-search", default=CUDA_PROVIDER_OPTIONS["cudnn_conv_algo_search"],
        help=f"cuDNN search modes to serve with, one run each (any of {', '.join(SEARCH_MODES)})",
    )  # fmt: skip
    parser.add_argument("--trace", action="store_true", help="bench.capacity's --trace: every decoded window")
    parser.add_argument("--score", type=Path, default=None, help="score a saved --audio file (CPU machine)")
    args = parser.parse_args(argv)
    return rescore(args.score) if args.score else measure(args)


def rescore(path: Path) -> dict[str, Any]:
    """Add the scores of a saved ``--audio`` file to ``results/gpu.json`` (the device run's, copied back)."""
    previous = RESULTS_DIR / "gpu.json"
    result = json.loads(previous.read_text()) if previous.is_file() else {}
    # the graph the device ran, as its result says (a run before ``float_lstms`` kept the int8 LSTMs)
    result["score"] = score(path, lstms="LSTMs" in result.get("graph", "LSTMs"))
    print(table(result["score"], SCORE_COLUMNS))
    kept = {k: v for k, v in result.items() if k not in ("benchmark", "machine")}
    print(f"wrote {write_result('gpu', kept)}")
    return result


def measure(args: argparse.Namespace) -> dict[str, Any]:
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        raise SystemExit(
            f"ONNX Runtime {ort.__version__} here has no CUDA provider ({ort.get_available_providers()}): "
            "install onnxruntime-gpu on a machine with a CUDA GPU"
        )
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        files, source = float_files(args.model_dir, work)
        print(f"float graph: {source}")
        engine = KokoroEngine(files, EngineOptions(providers=CUDA))  # refuses if CUDA does not start
        warm_up(engine, tuple(voice for voice, _ in batching.SENTENCES))
        result: dict[str, Any] = {
            "onnxruntime": ort.__version__,
            "gpu": gpu_name(),
            "graph": source,
            "cuda_options": dict(CUDA_PROVIDER_OPTIONS),
        }
        steps = set(args.steps.split(","))
        if "limits" in steps:
            result["kokoro_onnx_audio_per_s"] = kokoro_onnx_limit(engine)
            result["engine_whole_audio_per_s"] = single_call_limit(engine)
            print(f"kokoro-onnx create(): {result['kokoro_onnx_audio_per_s']:.1f} audio s/s; "
                  f"our whole pieces: {result['engine_whole_audio_per_s']:.1f}")  # fmt: skip
        graphs = split_model(engine.files.model)  # the graphs the engine's sessions were made from

        def checkpoint() -> None:  # a run cut short (a lease's end) keeps what it measured
            write_result("gpu", {**result, "complete": False})

        if "search" in steps:
            checkpoint()
            result["conv_search"] = conv_search(engine, graphs, args.repeat)
        if "cost" in steps:
            checkpoint()
            result["cost"] = batching.cost(engine, [24], args.max_batch, args.repeat)
            print(table(result["cost"], batching.COST_COLUMNS))
        if "captured" in steps:
            checkpoint()
            result["captured"] = captured_windows(engine, graphs, args.repeat)
        if "profile" in steps:
            checkpoint()
            result["profile"] = profile(engine, graphs, args.repeat)
        if "audio" in steps and args.audio:
            args.audio.parent.mkdir(parents=True, exist_ok=True)
            np.savez_compressed(args.audio, **render(engine))  # type: ignore[arg-type]
            print(f"wrote {args.audio}")
        checkpoint()
        if "served" in steps:
            del engine  # its GPU sessions: each served run loads the server's own engine
            os.environ["KOKORO_MODEL_DIR"] = str(work)  # the capacity runs load the float graph from here
            result["served"] = []
            shipped = CUDA_PROVIDER_OPTIONS["cudnn_conv_algo_search"]
            try:
                for mode in args.served_search.split(","):
                    # the server as shipped, its cuDNN search swapped for this run (read at session creation)
                    CUDA_PROVIDER_OPTIONS["cudnn_conv_algo_search"] = mode
                    served = capacity.main(
                        ["--ks", args.ks, "--stagger", str(args.stagger), "--options", args.options,
                         "--batch", str(args.batch), "--providers", ",".join(CUDA), *(["--trace"] if args.trace else [])],
                        result=f"gpu_capacity_{mode.lower()}",  # not section 4's results/capacity.json
                    )  # fmt: skip
                    kept = ("ks", "stagger_s", "rows", "throughput")
                    result["served"].append({"search": mode, **{key: served[key] for key in kept}})
                    checkpoint()
            finally:
                CUDA_PROVIDER_OPTIONS["cudnn_conv_algo_search"] = shipped
    print(f"wrote {write_result('gpu', result)}")
    return result


def gpu_name() -> str:
    import subprocess

    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown (no nvidia-smi)"
    return out.stdout.strip()


SCORE_COLUMNS = [
    ("voice", "voice"),
    ("wer_whole", "WER whole"),
    ("wer_alone", "WER streamed"),
    ("wer_batched", "WER batched"),
    ("pesq_whole", "PESQ whole"),
    ("pesq_alone", "PESQ streamed"),
    ("pesq_batched", "PESQ batched"),
]


def report(d: dict[str, Any]) -> str:
    """The run's steps, whichever it made (``--steps``)."""
    text = (
        f"{d['gpu']}, ONNX Runtime {d['onnxruntime']} (CUDA provider, {d['cuda_options']}); the float graph: "
        f"{d['graph']}.\n\n"
    )
    if "kokoro_onnx_audio_per_s" in d:
        text += (
            f"One call after another: kokoro-onnx's `create()` {md_value(d['kokoro_onnx_audio_per_s'], 1)} "
            f"audio s/s, our engine's whole pieces {md_value(d['engine_whole_audio_per_s'], 1)}.\n\n"
        )
    if "conv_search" in d:
        text += "cuDNN's convolution search, a decoder window alone (+ 8 frames of context):\n\n" + md_table(
            ["search", "window (frames)", "first call ms", "steady ms"],
            [
                [
                    r["search"],
                    str(r["window_frames"]),
                    md_value(r["first_ms"], 1),
                    md_value(r["steady_ms"], 2),
                ]
                for r in d["conv_search"]
            ],
        )
    if "profile" in d:
        text += "\n\nWhere the time goes (ONNX Runtime's profiler; per call, the heaviest operators):\n\n" + md_table(
            ["call", "ms per call", "on the CPU ms", "operator", "provider", "ms", "nodes"],
            [
                [p["call"], md_value(p["ms"], 1), md_value(p["cpu_ms"], 1), o["op"],
                 o["provider"].replace("ExecutionProvider", ""), md_value(o["ms"], 2), str(o["nodes"])]
                for p in d["profile"]
                for o in p["ops"][:6]
            ],
        )  # fmt: skip
    if "captured" in d:
        text += (
            "\n\nA 24-frame window (+ 8 of context) bound on the GPU, launched node by node and replayed as one "
            "captured CUDA graph; then with the host copies a served call makes (ms a call, median):\n\n"
        ) + md_table(
            ["windows in the call", "launched", "launched + copies", "captured", "captured + copies", "note"],
            [
                [str(r["batch"]), md_value(r.get("launched_ms"), 2), md_value(r.get("launched_copied_ms"), 2),
                 md_value(r.get("captured_ms"), 2), md_value(r.get("captured_copied_ms"), 2),
                 r.get("captured_error", r.get("launched_error", ""))[:160]]
                for r in d["captured"]
            ],
        )  # fmt: skip
    if "cost" in d:
        text += "\n\nBatched decoder windows:\n\n" + batching.report(
            {"providers": list(CUDA), "cost": d["cost"]}
        )
    served_runs = d.get("served", [])
    if isinstance(served_runs, dict):  # a run before --served-search: one run, with the engine's search
        served_runs = [{"search": d["cuda_options"]["cudnn_conv_algo_search"], **served_runs}]
    for served in served_runs:
        text += (
            f"\n\nThe served path, cuDNN search {served['search']}: K listeners joining {served['stagger_s']:g} s "
            "apart.\n\n" + capacity.report({**served, "rate": 50.0, "cpu_load": 0.0, "repeat": 1}, plot=None)
        )
    if "score" in d:
        text += (
            "\n\nWhat it sounds like (Whisper forced to English; PESQ against the CPU's whole piece):\n\n"
            + md_table(
                [label for _, label in SCORE_COLUMNS],
                [[r["voice"], *(md_value(r[key], 2) for key, _ in SCORE_COLUMNS[1:])] for r in d["score"]],
            )
        )
    return text


if __name__ == "__main__":
    main()
