"""Batched decoder windows: what a row costs in a batch, and whether batched audio is the same speech.

Cost: windows of several sizes (kept frames + 4 frames of context each side), from different sentences and
voices, decoded alone and in batches of 2..N; median milliseconds per call and per window, and the gain
per window over decoding it alone (1.0 = batching buys nothing).

Fidelity: the same sentences streamed one at a time, and all at once through the batcher (one thread per
sentence, windows of one size so they meet); per sentence, speech-to-text words against the text for both,
and the log-spectral distance between the two renditions (next to the distance between two windowings of
the same piece, alone, which is the variation windowing itself brings).

Run: ``python -m streamvoice.bench.batching [--providers CUDAExecutionProvider,CPUExecutionProvider]``
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamvoice.bench.common import table, write_result
from streamvoice.bench.spectral import log_spectral_distance
from streamvoice.bench.tables import md_table, md_value
from streamvoice.engine import KokoroEngine
from streamvoice.engine.options import EngineOptions
from streamvoice.engine.readiness import warm_up
from streamvoice.engine.streaming.split_kokoro import SplitKokoro
from streamvoice.engine.streaming.windows import WindowPlan

SENTENCES = [
    ("af_heart", "The museum opens at nine, and tours start every half hour after that."),
    ("am_michael", "Please bring your passport, or you cannot board the plane this evening."),
    ("bf_emma", "She planted tomatoes along the fence, where the sun stays all afternoon."),
    ("am_adam", "If the printer jams again, open the side panel and pull the paper gently."),
]
CONTEXT = 4


def _features(engine: KokoroEngine, voice: str, text: str) -> tuple[dict[str, Any], NDArray[np.float32]]:
    split = engine.split
    assert split is not None
    spec = engine.parse_voice(voice)
    piece = engine.planner.plan(text, engine.resolve_lang(spec, None))[0]
    feeds, style = engine.feeds(piece.tokens, engine.style_pack(spec), 1.0)
    return split.features(feeds), style


def _concurrently(split: SplitKokoro, jobs: list[tuple[Any, ...]]) -> float:
    """Run ``split.decode`` for every job on its own thread at once; the wall time."""
    threads = [threading.Thread(target=split.decode, args=job) for job in jobs]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started


def cost(engine: KokoroEngine, sizes: list[int], max_batch: int, repeat: int) -> list[dict[str, Any]]:
    split = engine.split
    assert split is not None
    inputs = [(_features(engine, voice, text), voice) for voice, text in SENTENCES]
    rows: list[dict[str, Any]] = []
    for size in sizes:
        computed = size + 2 * CONTEXT
        alone_ms: float | None = None
        for batch in range(1, max_batch + 1):
            jobs = []
            for k in range(batch):
                (feats, style), voice = inputs[k % len(inputs)]
                start = 8 + k  # different frames of different sentences
                prior = engine.voice_stats(voice)
                jobs.append((feats, style, start, start + computed, prior, 0.5))
            busy = {"n": batch}
            split.enable_batching(batch, 0.5, lambda b=busy: b["n"])  # type: ignore[misc]
            times = [_concurrently(split, jobs) for _ in range(repeat + 1)][1:]
            split.batcher = None
            ms = statistics.median(times) * 1000
            per_window = ms / batch
            if batch == 1:
                alone_ms = per_window
            rows.append(
                {
                    "window_frames": size,
                    "computed_frames": computed,
                    "batch": batch,
                    "ms_per_call": ms,
                    "ms_per_window": per_window,
                    "gain_per_window": (alone_ms / per_window) if alone_ms else None,
                    "audio_s_per_s": batch * size * 0.025 / (ms / 1000),
                }
            )
            print(f"window {size} frames, batch {batch}: {ms:.0f} ms", flush=True)
    return rows


def _stream(
    engine: KokoroEngine, voice: str, text: str, plan: WindowPlan, out: dict[str, NDArray[np.float32]]
) -> None:
    """The model's windowed audio, silences and all (untrimmed, so renditions align sample for sample)."""
    spec = engine.parse_voice(voice)
    pieces = engine.planner.plan(text, engine.resolve_lang(spec, None))
    out[voice] = np.concatenate(
        [c for p in pieces for c in engine.stream_piece(p, spec, 1.0, plan=plan, trim=False)]
    )


def stream_together(
    engine: KokoroEngine, plan: WindowPlan
) -> tuple[dict[str, NDArray[np.float32]], tuple[int, int]]:
    """Every sentence streamed at once, one thread each, through the batcher (a window waits for every live
    sentence's); each voice's audio, and the batched calls made and the windows they carried."""
    split = engine.split
    assert split is not None
    batched: dict[str, NDArray[np.float32]] = {}
    running = {"n": len(SENTENCES)}
    lock = threading.Lock()

    def one(voice: str, text: str) -> None:
        try:
            _stream(engine, voice, text, plan, batched)
        finally:
            with lock:
                running["n"] -= 1

    split.enable_batching(len(SENTENCES), 2.0, lambda: running["n"])
    threads = [threading.Thread(target=one, args=pair) for pair in SENTENCES]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    batcher = split.batcher
    assert batcher is not None
    split.batcher = None
    return batched, (batcher.calls, batcher.rows)


def fidelity(engine: KokoroEngine, size: int) -> list[dict[str, Any]]:
    from streamvoice.bench.asr import Transcriber
    from streamvoice.bench.wer import word_error_rate

    plan = WindowPlan(first=size, second=size, growth=1.0, largest=size)
    other = WindowPlan(first=size + 4, second=size + 4, growth=1.0, largest=size + 4)
    alone: dict[str, NDArray[np.float32]] = {}
    shifted: dict[str, NDArray[np.float32]] = {}
    for voice, text in SENTENCES:
        _stream(engine, voice, text, plan, alone)
        _stream(engine, voice, text, other, shifted)
    batched, (calls, windows) = stream_together(engine, plan)
    asr = Transcriber.load()
    rows = []
    for voice, text in SENTENCES:
        rows.append(
            {
                "voice": voice,
                "wer_alone": word_error_rate(text, asr.transcribe(alone[voice])),
                "wer_batched": word_error_rate(text, asr.transcribe(batched[voice])),
                "lsd_batched_vs_alone_db": log_spectral_distance(alone[voice], batched[voice]),
                "lsd_two_windowings_db": log_spectral_distance(alone[voice], shifted[voice]),
                "mean_batch": windows / calls if calls else 0.0,
            }
        )
    return rows


COST_COLUMNS = [
    ("window_frames", "window (frames)"),
    ("batch", "batch"),
    ("ms_per_call", "ms/call"),
    ("ms_per_window", "ms/window"),
    ("gain_per_window", "gain/window"),
    ("audio_s_per_s", "audio s/s"),
]
FIDELITY_COLUMNS = [
    ("voice", "voice"),
    ("wer_alone", "WER alone"),
    ("wer_batched", "WER batched"),
    ("lsd_batched_vs_alone_db", "LSD batched vs alone (dB)"),
    ("lsd_two_windowings_db", "LSD two windowings (dB)"),
    ("mean_batch", "windows/call"),
]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="12,24,40", help="kept frames per window (25 ms each)")
    parser.add_argument("--max-batch", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--providers", default=None, help="ONNX Runtime providers, comma-separated")
    parser.add_argument("--no-fidelity", action="store_true", help="skip the speech-to-text comparison")
    args = parser.parse_args()
    providers = tuple(args.providers.split(",")) if args.providers else None
    engine = KokoroEngine.load(options=EngineOptions(providers=providers))
    warm_up(engine, tuple(voice for voice, _ in SENTENCES))
    if engine.split is None or not engine.split.batchable:
        raise SystemExit("this model's decoder cannot be batched")
    print(f"providers: {engine.providers}")
    costs = cost(engine, [int(s) for s in args.sizes.split(",")], args.max_batch, args.repeat)
    print()
    print(table(costs, COST_COLUMNS))
    result: dict[str, Any] = {"providers": engine.providers, "cost": costs}
    if not args.no_fidelity:
        result["fidelity"] = fidelity(engine, 24)
        print()
        print(table(result["fidelity"], FIDELITY_COLUMNS))
    print(f"\nwrote {write_result('batching', result)}")


def report(d: dict[str, Any]) -> str:
    cost = [
        [
            str(r["window_frames"]),
            str(r["batch"]),
            md_value(r["ms_per_call"], 1),
            md_value(r["ms_per_window"], 1),
            md_value(r["gain_per_window"], 2),
            md_value(r["audio_s_per_s"], 2),
        ]
        for r in d["cost"]
    ]
    text = f"Providers: {', '.join(d['providers'])}.\n\n" + md_table(
        ["window (frames, + 4 of context each side)", "batch", "ms per call", "ms per window", "gain per window",
         "audio s per s"],
        cost,
    )  # fmt: skip
    if "fidelity" in d:
        rows = [
            [
                r["voice"],
                md_value(r["wer_alone"], 2),
                md_value(r["wer_batched"], 2),
                md_value(r["lsd_batched_vs_alone_db"], 2),
                md_value(r["lsd_two_windowings_db"], 2),
                md_value(r["mean_batch"], 2),
            ]
            for r in d["fidelity"]
        ]
        text += (
            "\n\nThe same sentences streamed alone and all at once through the batcher (24-frame windows): "
            "word error rate by Whisper against the text, and the log-spectral distance between the two "
            "renditions next to the distance between two windowings of the same piece decoded alone.\n\n"
            + md_table(
                [
                    "voice",
                    "WER alone",
                    "WER batched",
                    "LSD batched vs alone dB",
                    "LSD two windowings dB",
                    "windows per call",
                ],
                rows,
            )
        )
    return text


if __name__ == "__main__":
    main()
