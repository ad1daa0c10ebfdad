"""Should the CPU run the PyTorch engine? Whole pieces, one after another, the same tokens and voice on each:
the static-int8 ONNX engine (the CPU's default), the int8 file's graph as exported, the PyTorch model eager, and the PyTorch model compiled by
``torch.compile`` (Inductor; its first call per shape compiles, not timed). Audio seconds per second, and
PESQ of each against the ONNX float graph's rendition (what the static-int8 engine is judged on too).

Run (the PyTorch environment, ``make test-torch`` builds it): ``.venv-torch/bin/python -m
streamvoice.bench.torch_cpu`` -> a table and ``results/torch_cpu.json``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=4, help="CALIBRATION's first N (voice, phonemes)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()

    import onnxruntime as ort
    import torch
    from pesq import pesq

    from streamvoice.bench.asr import resample
    from streamvoice.bench.common import table, write_result
    from streamvoice.engine import KokoroEngine
    from streamvoice.engine.options import EngineOptions
    from streamvoice.engine.static_int8.static_decoder import CALIBRATION
    from streamvoice.engine.torch_kokoro.model import Kokoro, Row, Runner
    from streamvoice.engine.torch_kokoro.weights import float_model

    engine = KokoroEngine.load(options=EngineOptions(runtime="onnx"))
    said = CALIBRATION[: args.sentences]
    feeds = engine.front_feeds(said)
    rows = [Row(f["tokens"][0].tolist(), f["style"][0]) for f in feeds]
    graph = float_model(engine.files.model)
    reference = ort.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
    truth = [reference.run(None, f)[0].ravel() for f in feeds]
    exported = KokoroEngine.load(options=EngineOptions(runtime="onnx", decoder="exported"))

    def whole(e: KokoroEngine) -> Any:
        split = e.split
        assert split is not None

        def speak(i: int) -> np.ndarray[Any, Any]:  # the engine's own whole-piece decode, untrimmed
            decoded = split.decode_piece(feeds[i], feeds[i]["style"], _whole())
            return np.concatenate([c for c, _ in decoded.chunks])

        return speak

    model = Kokoro.from_onnx(graph)
    eager = Runner(model)
    candidates: dict[str, Any] = {
        f"onnx {engine.decoder_graph}": whole(engine),
        "onnx int8 as exported": whole(exported),
        "torch eager": lambda i: eager.speak([rows[i]])[0].audio,
    }
    if args.compile:
        compiled = Kokoro.from_onnx(graph)
        compiled.decoder = torch.compile(compiled.decoder)  # type: ignore[assignment]
        compiled.front.durations = torch.compile(compiled.front.durations)  # type: ignore[method-assign]
        runner = Runner(compiled)
        candidates["torch.compile"] = lambda i: runner.speak([rows[i]])[0].audio

    out = []
    for name, speak in candidates.items():
        for i in range(len(rows)):
            speak(i)  # first calls: sessions, allocations, compilation per shape
        times, scores, audio_s = [], [], 0.0
        for _ in range(args.repeat):
            started = time.perf_counter()
            audio = [speak(i) for i in range(len(rows))]
            times.append(time.perf_counter() - started)
            audio_s = sum(len(a) for a in audio) / 24_000
        for a, t in zip(audio, truth, strict=True):
            n = min(len(a), len(t))
            scores.append(pesq(16000, resample(t[:n], 24000), resample(a[:n], 24000), "wb"))
        out.append(
            {
                "engine": name,
                "audio_s_per_s": round(audio_s / statistics.median(times), 2),
                "pesq_min": round(min(scores), 2),
                "pesq_mean": round(statistics.mean(scores), 2),
            }
        )
    columns = [("engine", "engine"), ("audio_s_per_s", "audio s/s"), ("pesq_min", "PESQ min")]
    print(table(out, [*columns, ("pesq_mean", "PESQ mean")]))
    meta = {"sentences": [v for v, _ in said], "threads": torch.get_num_threads(), "rows": out}
    print(write_result("torch_cpu", meta))


def _whole() -> Any:
    from streamvoice.engine.graphs import Decoding

    return Decoding(windowed=False)


if __name__ == "__main__":
    main()
