"""The PyTorch engine on a GPU: parity with the CPU, CUDA graphs captured, and audio seconds per second by batch.

Three steps, because the device machine has PyTorch but not the G2P packages, PESQ or Whisper:

1. CPU: ``python -m streamvoice.bench.gpu_torch --prepare results/gpu_rows.json`` writes the rows (tokens
   and style of CALIBRATION's nine-language sentences), and ``xz -6 -c $KOKORO_MODEL_DIR/kokoro-v1.0.int8.onnx
   > results/kokoro-v1.0.int8.onnx.xz`` the model (~58 MiB), so one device call can carry both.
2. Device (the device tool's ``run``, ``carry`` = those two files, ``timeout_s`` 600): ``PYTHONPATH=src python
   -m streamvoice.bench.gpu_torch --out $OUT/gpu_torch.json --audio $OUT/gpu_torch_audio.npz``. The image's
   PyTorch, numpy and onnx are all it imports. It loads the model on CUDA, captures every batch size's
   graphs, times ``--repeat`` calls per batch size (each row a whole piece), runs the served path (below),
   and keeps each sentence's audio spoken alone and inside a batch.
3. CPU: ``python -m streamvoice.bench.gpu_torch --score results/gpu_torch_audio.npz --rows results/gpu_rows.json``:
   PESQ of the GPU's audio against the CPU's rendition of the same weights (``Runner`` on the CPU).

The device step also runs the served path without its transport (``bench.gpu_served``): K listeners joining
``--stagger`` s apart, each an answer of four pieces written at LLM pace, all through the GPU scheduler, each
played in real time: how many are kept fed (heard within 1 s, at most 100 ms of stalls) at ``--ks``, and the
audio seconds made per second with ``--saturate`` listeners all at once.
"""

from __future__ import annotations

import argparse
import json
import lzma
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

BATCHES = (1, 8, 32)
KS = (1, 64, 256, 512, 768, 1024)


def prepare(path: Path) -> None:
    from kokoro_onnx.tokenizer import Tokenizer

    from streamvoice.engine.static_int8.static_decoder import CALIBRATION
    from streamvoice.model_files import resolve_model_files

    packs = np.load(resolve_model_files().voices)
    tokenizer = Tokenizer()
    rows = []
    for voice, phonemes in CALIBRATION:
        tokens = tokenizer.tokenize(phonemes)
        rows.append(
            {
                "voice": voice,
                "tokens": [0, *tokens, 0],
                "style": packs[voice][len(tokens) - 1].ravel().tolist(),
            }
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows))
    print(f"{len(rows)} rows -> {path}")


def load_rows(path: Path) -> tuple[list[str], list[Any]]:
    from streamvoice.engine.torch_kokoro.model import Row

    raw = json.loads(path.read_text())
    return [r["voice"] for r in raw], [Row(r["tokens"], np.array(r["style"], dtype=np.float32)) for r in raw]


def model_file(path: Path, folder: Path) -> Path:
    if path.suffix != ".xz":
        return path
    out = folder / path.stem
    with lzma.open(path) as src, out.open("wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 22)
    return out


def run(args: argparse.Namespace) -> None:
    import torch

    from streamvoice.bench.gpu_served import serve
    from streamvoice.engine.torch_kokoro.graph import MAX_ROWS
    from streamvoice.engine.torch_kokoro.graphs import BATCH_BUCKETS, GraphRunner
    from streamvoice.engine.torch_kokoro.model import Kokoro, Runner

    on_gpu = args.device == "cuda"
    if on_gpu and not torch.cuda.is_available():
        raise SystemExit("this step needs a CUDA GPU (the device machine), or --device cpu for a dry run")
    voices, rows = load_rows(args.rows)
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        model = Kokoro.from_onnx(model_file(args.model, Path(folder)), args.device)
        loaded_s = time.perf_counter() - started
    runner = GraphRunner(model) if on_gpu else Runner(model)
    started = time.perf_counter()
    # every batch size the scheduler can form (up to its 32 rows), so the served runs never capture mid-run
    batch_sizes = [b for b in BATCH_BUCKETS if b <= MAX_ROWS]
    graphs = runner.warm(rows, batch_sizes) if isinstance(runner, GraphRunner) else 0
    capture_s = time.perf_counter() - started
    table = []
    for b in args.batches:
        batch = [rows[i % len(rows)] for i in range(b)]
        times = []
        for _ in range(args.repeat):
            if on_gpu:
                torch.cuda.synchronize()
            t = time.perf_counter()
            spoken = runner.speak(batch)
            times.append(time.perf_counter() - t)
        audio_s = sum(len(s.audio) for s in spoken) / 24000
        median = statistics.median(times)
        table.append(
            {"batch": b, "call_ms": round(median * 1000, 2), "audio_s_per_s": round(audio_s / median, 1)}
        )
        print(f"batch {b:3d}: {median * 1000:8.2f} ms per call, {audio_s / median:8.1f} audio s/s")
    served = []
    for k in [*args.ks, args.saturate]:
        stagger = 0.0 if k == args.saturate else args.stagger
        out = serve(
            runner.speak,
            rows,
            lambda r: len(r.tokens),
            lambda s: len(s.audio),
            k,
            stagger_s=stagger,
            max_rows=MAX_ROWS,
        )
        out["saturation"] = k == args.saturate
        served.append(out)
        print(json.dumps(out))
    alone = {v: runner.speak([r])[0].audio for v, r in zip(voices, rows, strict=True)}
    largest = max(*args.batches, len(rows))
    inside = runner.speak([rows[i % len(rows)] for i in range(largest)])
    result = {
        "device": torch.cuda.get_device_name() if on_gpu else "cpu",
        "torch": torch.__version__,
        "load_s": round(loaded_s, 2),
        "graphs": graphs,
        "capture_s": round(capture_s, 2),
        "table": table,
        "served": served,
    }
    args.out.write_text(json.dumps(result, indent=2))
    np.savez_compressed(
        args.audio,
        **{f"alone/{v}": a for v, a in alone.items()},
        **{f"batch/{voices[i]}": inside[i].audio for i in range(len(rows))},
    )
    print(json.dumps(result, indent=2))


def score(args: argparse.Namespace) -> None:
    from pesq import pesq

    from streamvoice.bench.asr import resample
    from streamvoice.engine.torch_kokoro.model import Kokoro, Runner
    from streamvoice.model_files import resolve_model_files

    voices, rows = load_rows(args.rows)
    runner = Runner(Kokoro.from_onnx(resolve_model_files().model))
    gpu = np.load(args.score)
    print(f"{'voice':12s} {'alone PESQ':>10s} {'in batch PESQ':>14s}")
    for voice, row in zip(voices, rows, strict=True):
        cpu = resample(runner.speak([row])[0].audio, 24000)
        scores = [
            pesq(16000, cpu, resample(gpu[f"{kind}/{voice}"], 24000), "wb") for kind in ("alone", "batch")
        ]
        print(f"{voice:12s} {scores[0]:10.2f} {scores[1]:14.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prepare", type=Path, help="write the rows here (CPU)")
    parser.add_argument("--rows", type=Path, default=Path("results/gpu_rows.json"))
    parser.add_argument("--model", type=Path, default=Path("results/kokoro-v1.0.int8.onnx.xz"))
    parser.add_argument("--device", default="cuda", help="cuda, or cpu for a dry run of the device step")
    parser.add_argument("--batches", type=int, nargs="+", default=list(BATCHES))
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--ks", type=int, nargs="+", default=list(KS), help="listeners in the served runs")
    parser.add_argument("--stagger", type=float, default=0.01, help="seconds between listeners joining")
    parser.add_argument("--saturate", type=int, default=1024, help="listeners all at once: audio s/s")
    parser.add_argument("--out", type=Path, default=Path("results/gpu_torch.json"))
    parser.add_argument("--audio", type=Path, default=Path("results/gpu_torch_audio.npz"))
    parser.add_argument("--score", type=Path, help="score this device run's audio against the CPU (CPU)")
    args = parser.parse_args()
    if args.prepare:
        prepare(args.prepare)
    elif args.score:
        score(args)
    else:
        run(args)


if __name__ == "__main__":
    main()
