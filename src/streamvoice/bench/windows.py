"""In-piece streaming against whole-piece synthesis of the same pieces.

For ~60-token sentences: time to first audio and total time (windowed vs whole), whether every window is
ready before the audio ahead of it has finished playing, speech-to-text word error rate of both, the
log-spectral distance between them, and a seam metric: high-frequency (sample-step) energy around window
seams, windowed over whole-piece at the same positions (1.0 = the seams add nothing). Optionally draws
spectrograms of a few seams.

Run: ``python -m streamvoice.bench.windows [--trials 5] [--plots docs/img]``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamvoice.bench.common import stats, table, write_result
from streamvoice.bench.spectral import log_spectral_distance
from streamvoice.bench.tables import md_table, md_value
from streamvoice.engine import KokoroEngine
from streamvoice.engine.readiness import warm_up
from streamvoice.engine.streaming.windows import SAMPLES_PER_FRAME, WindowPlan
from streamvoice.engine.surgery.norm_stats import NormStats
from streamvoice.protocol import DEFAULT_VOICE, SAMPLE_RATE

SENTENCES = [  # ~60 phoneme tokens each
    "The museum opens at nine, and tours start every half hour.",
    "Please bring your passport, or you cannot board the plane.",
    "She planted tomatoes along the fence where the sun stays.",
    "If the printer jams, open the side panel and pull gently.",
    "The library stays open late during exams for students.",
    "Our thermostat learns your schedule and saves energy.",
    "We moved the meeting to Friday because the room was booked.",
    "Turn left at the bakery and walk two blocks to the station.",
    "Your refund was approved and should reach your card this week.",
    "The battery lasts all day, and it charges fully in an hour.",
]
SR = SAMPLE_RATE


def seam_positions(plan: WindowPlan, samples: int) -> list[int]:
    frames = samples // SAMPLES_PER_FRAME
    return [end * SAMPLES_PER_FRAME for _, end in plan.windows(frames)[:-1]]


def step_energy(audio: NDArray[np.float32], centre: int, half: int = 120) -> float:
    seg = audio[max(1, centre - half) : centre + half]
    return float(np.mean(np.diff(seg) ** 2)) if seg.size > 2 else 0.0


MODES = ("warm", "cold")  # warm: the voice's statistics are known (after warm-up); cold: its first piece


def measure_piece(
    engine: KokoroEngine, text: str, mode: str, prior: tuple[NormStats | None, NormStats | None]
) -> dict[str, Any]:
    """``prior``: the voice's speech and silence statistics, restored before each warm run (both: the
    speech estimate counts the silence the trimmed path never decodes)."""
    spec = engine.parse_voice(DEFAULT_VOICE)
    piece = engine.planner.plan(text, "en-us")[0]
    started = time.perf_counter()
    whole = engine.synthesize_piece(piece, spec, 1.0, trim=False, learn=False)
    whole_ms = (time.perf_counter() - started) * 1000
    # Warm runs start from the warm-up's statistics only, never from earlier runs of the same sentences.
    key = None
    if mode == "warm":
        key = DEFAULT_VOICE
        engine.set_voice_stats(key, *prior)  # what it learnt here is undone before the next warm run
    started = time.perf_counter()
    ready: list[tuple[float, int]] = []  # (seconds since start, samples so far) per chunk
    parts = []
    total = 0
    for chunk in engine.stream_piece(piece, spec, 1.0, trim=False, learn=key is not None):
        total += chunk.size
        parts.append(chunk)
        ready.append((time.perf_counter() - started, total))
    windowed = np.concatenate(parts)
    # The served path: only the frames around the speech, its silences trimmed (the same voice state).
    if mode == "warm":
        engine.set_voice_stats(DEFAULT_VOICE, *prior)
    started = time.perf_counter()
    trimmed: list[tuple[float, int]] = []
    total = 0
    for chunk in engine.stream_piece(piece, spec, 1.0) if key else _cold_piece(engine, piece, spec):
        total += chunk.size
        trimmed.append((time.perf_counter() - started, total))
    return {
        **_timing(ready, ""),
        **_timing(trimmed, "trimmed_"),
        "mode": mode,
        "tokens": len(piece.tokens),
        "whole_ms": whole_ms,
        "same_length": windowed.size == whole.size,
        "whole": whole,
        "windowed": windowed,
    }


def _timing(ready: list[tuple[float, int]], prefix: str) -> dict[str, float]:
    """First chunk, last chunk, and the worst lateness: a chunk is on time if it is ready before the audio
    ahead of it has played out (playback starting when the first chunk is ready)."""
    first_s = ready[0][0]
    late = [t - (first_s + before / SR) for (t, _), (_, before) in zip(ready[1:], ready[:-1], strict=True)]
    return {
        f"{prefix}first_ms": first_s * 1000,
        f"{prefix}total_ms": ready[-1][0] * 1000,
        f"{prefix}max_lateness_ms": max([0.0, *[x * 1000 for x in late]]),
    }


def _cold_piece(engine: KokoroEngine, piece: Any, spec: Any) -> Any:
    """A voice's first piece without statistics (what the statistics cache avoids for stock voices)."""
    saved = engine.voice_stats(spec.text), engine.memory.silence(spec)
    engine.set_voice_stats(spec.text, None, None)
    try:
        yield from engine.stream_piece(piece, spec, 1.0)
    finally:
        engine.set_voice_stats(spec.text, *saved)


def summed_ratio(pairs: list[tuple[float, float]]) -> float | None:
    whole = sum(b for _, b in pairs)
    return sum(a for a, _ in pairs) / whole if whole else None


def median_ratio(pairs: list[tuple[float, float]]) -> float | None:
    return float(np.median([a / max(b, 1e-12) for a, b in pairs])) if pairs else None


def quality(plan: WindowPlan, runs: list[dict[str, Any]], transcriber: Any) -> dict[str, Any]:
    """Seam energy, spectral distance and word error rate of windowed against whole-piece audio."""
    seam_pairs: list[tuple[float, float]] = []  # (windowed, whole) step energy at each position
    other_pairs: list[tuple[float, float]] = []
    rng = np.random.default_rng(0)
    lsd: list[float] = []
    wer_whole: list[float] = []
    wer_windowed: list[float] = []
    xf = plan.crossfade
    for run in runs:
        whole, windowed = run["whole"], run["windowed"]
        # The crossfade ends at the seam: measure around its middle.
        seams = [p - xf // 2 for p in seam_positions(plan, windowed.size)]
        far = [
            int(p)
            for p in rng.integers(600, windowed.size - 600, 40)
            if min((abs(p - s) for s in seams), default=10**9) > 1200
        ]
        seam_pairs += [(step_energy(windowed, pos), step_energy(whole, pos)) for pos in seams]
        other_pairs += [(step_energy(windowed, pos), step_energy(whole, pos)) for pos in far]
        lsd.append(log_spectral_distance(windowed, whole))
        if transcriber is not None:
            from streamvoice.bench.wer import word_error_rate

            wer_whole.append(word_error_rate(run["text"], transcriber.transcribe(whole)))
            wer_windowed.append(word_error_rate(run["text"], transcriber.transcribe(windowed)))
    return {
        "seam_step_energy_ratio": summed_ratio(seam_pairs),
        "elsewhere_step_energy_ratio": summed_ratio(other_pairs),
        # Per position: robust to a few loud positions dominating the sums.
        "seam_step_energy_median_ratio": median_ratio(seam_pairs),
        "elsewhere_step_energy_median_ratio": median_ratio(other_pairs),
        "log_spectral_distance_db": stats(lsd),
        "wer_whole": float(np.mean(wer_whole)) if wer_whole else None,
        "wer_windowed": float(np.mean(wer_windowed)) if wer_windowed else None,
    }


def summarise(plan: WindowPlan, runs: list[dict[str, Any]], transcriber: Any) -> dict[str, Any]:
    whole_ms = stats([r["whole_ms"] for r in runs])
    first_ms = stats([r["first_ms"] for r in runs])
    total_ms = stats([r["total_ms"] for r in runs])
    return {
        "tokens_mean": float(np.mean([r["tokens"] for r in runs])),
        "whole_ms": whole_ms,
        "first_ms": first_ms,
        "total_ms": total_ms,
        "first_over_whole": first_ms["mean"] / whole_ms["mean"],
        "total_over_whole": total_ms["mean"] / whole_ms["mean"],
        "max_lateness_ms": max(r["max_lateness_ms"] for r in runs),
        "all_same_length": all(r["same_length"] for r in runs),
        "trimmed_first_ms": stats([r["trimmed_first_ms"] for r in runs]),
        "trimmed_first_over_whole": stats([r["trimmed_first_ms"] for r in runs])["mean"] / whole_ms["mean"],
        "trimmed_total_over_whole": stats([r["trimmed_total_ms"] for r in runs])["mean"] / whole_ms["mean"],
        "trimmed_max_lateness_ms": max(r["trimmed_max_lateness_ms"] for r in runs),
        **quality(plan, runs[: len(SENTENCES)], transcriber),
        "window_plan": plan.__dict__,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--plots", type=Path, default=None, help="folder for seam spectrogram PNGs")
    parser.add_argument("--no-asr", action="store_true")
    args = parser.parse_args(argv)

    engine = KokoroEngine.load()
    if not engine.streams_in_piece:
        raise SystemExit("in-piece streaming is off for this model (see the log); nothing to compare")
    warm_up(engine, (DEFAULT_VOICE,))  # what the server does at start-up
    prior = engine.voice_stats(DEFAULT_VOICE), engine.memory.silence(engine.parse_voice(DEFAULT_VOICE))
    runs: list[dict[str, Any]] = []
    for _ in range(args.trials):
        for text in SENTENCES:
            for mode in MODES:
                runs.append({"text": text, **measure_piece(engine, text, mode, prior)})

    transcriber = None
    if not args.no_asr:
        from streamvoice.bench.asr import Transcriber

        transcriber = Transcriber.load()
    plans = {"warm": engine.window_plan, "cold": engine.cold_window_plan}
    by_mode = {
        mode: summarise(plans[mode], [r for r in runs if r["mode"] == mode], transcriber) for mode in MODES
    }
    summary = {**by_mode["warm"], "cold": by_mode["cold"]}
    print(f"{len(runs)} syntheses of ~{summary['tokens_mean']:.0f}-token pieces")
    print("warm: the voice's decoder statistics are known (warm-up, earlier pieces); cold: its first piece\n")
    rows = []
    for mode, s in by_mode.items():
        rows += [
            {"metric": f"{mode}: whole-piece synthesis, ms", **s["whole_ms"]},
            {"metric": f"{mode}: windowed first audio, ms", **s["first_ms"]},
            {"metric": f"{mode}: windowed all audio, ms", **s["total_ms"]},
        ]
    print(table(rows, [("metric", "metric"), ("mean", "mean"), ("p50", "p50"), ("p95", "p95")]))
    for mode, s in by_mode.items():
        print(f"\n{mode}:")
        print(f"  first audio / whole piece: {s['first_over_whole']:.1%}   (target <= 35%)")
        print(f"  total / whole piece:       {s['total_over_whole']:.2f}x   (target <= 1.15x)")
        print(
            f"  worst window lateness vs real-time playback: {s['max_lateness_ms']:.0f} ms   (0 = always ahead)"
        )
        print(f"  same length as whole-piece audio: {s['all_same_length']}")
        print(
            f"  served path (silences not decoded, trimmed): first audio {s['trimmed_first_over_whole']:.1%}, "
            f"all audio {s['trimmed_total_over_whole']:.2f}x of the whole piece, worst lateness "
            f"{s['trimmed_max_lateness_ms']:.0f} ms"
        )
        print(
            "  high-frequency (sample-step) energy, windowed / whole at the same positions: "
            f"at seams {s['seam_step_energy_ratio']:.2f}, elsewhere {s['elsewhere_step_energy_ratio']:.2f}; "
            f"median per position: at seams {s['seam_step_energy_median_ratio']:.2f}, "
            f"elsewhere {s['elsewhere_step_energy_median_ratio']:.2f}"
        )
        print(
            f"  log-spectral distance windowed vs whole: {s['log_spectral_distance_db'].get('mean', float('nan')):.2f} dB"
        )
        if s["wer_whole"] is not None:
            print(f"  word error rate: whole {s['wer_whole']:.3f}, windowed {s['wer_windowed']:.3f}")
    if args.plots:
        draw_seams(engine, next(r for r in runs if r["mode"] == "warm"), args.plots)
    path = write_result(
        "windows",
        {
            "summary": summary,
            "runs": [{k: v for k, v in r.items() if k not in ("whole", "windowed")} for r in runs],
        },
    )
    print(f"\nwrote {path}")
    return summary


def draw_seams(engine: KokoroEngine, run: dict[str, Any], folder: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    seams = seam_positions(engine.window_plan, run["windowed"].size)[:3]
    fig, axes = plt.subplots(2, len(seams), figsize=(4 * len(seams), 5), squeeze=False)
    for col, pos in enumerate(seams):
        for row, (label, audio) in enumerate((("whole piece", run["whole"]), ("windowed", run["windowed"]))):
            seg = audio[max(0, pos - 6000) : pos + 6000]
            ax = axes[row][col]
            ax.specgram(seg, NFFT=512, Fs=SR, noverlap=384, cmap="magma")
            ax.axvline(min(pos, 6000) / SR, color="cyan", lw=0.8, ls="--")
            ax.set_title(f"{label}, seam at {pos / SR:.2f} s", fontsize=9)
            ax.set_ylim(0, 8000)
    fig.tight_layout()
    out = folder / "seams.png"
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def report(d: dict[str, Any]) -> str:
    warm = d["summary"]
    cold = warm.get("cold", {})

    def row(label: str, value: Any) -> list[str]:
        return [label, value(warm), value(cold) if cold else "-"]

    rows = [
        row("whole-piece synthesis (ms, mean)", lambda s: md_value(s["whole_ms"]["mean"])),
        row("windowed: first audio (ms, mean)", lambda s: md_value(s["first_ms"]["mean"])),
        row("first audio / whole piece (target <= 35%)", lambda s: f"{s['first_over_whole']:.1%}"),
        row("windowed: all audio (ms, mean)", lambda s: md_value(s["total_ms"]["mean"])),
        row("total / whole piece (target <= 1.15x)", lambda s: f"{s['total_over_whole']:.2f}x"),
        row(
            "worst lateness of a window vs real-time playback (ms)", lambda s: md_value(s["max_lateness_ms"])
        ),
        row("same length as whole-piece audio", lambda s: md_value(s["all_same_length"])),
        row(
            "word error rate, whole / windowed",
            lambda s: f"{md_value(s['wer_whole'], 3)} / {md_value(s['wer_windowed'], 3)}",
        ),
        row(
            "log-spectral distance windowed vs whole (dB, speech frames)",
            lambda s: md_value(s["log_spectral_distance_db"]["mean"], 2),
        ),
        row(
            "HF step energy windowed / whole, summed: at seams, elsewhere",
            lambda s: (
                f"{md_value(s['seam_step_energy_ratio'], 2)}, {md_value(s['elsewhere_step_energy_ratio'], 2)}"
            ),
        ),
        row(
            "HF step energy windowed / whole, median per position: at seams, elsewhere",
            lambda s: (
                f"{md_value(s.get('seam_step_energy_median_ratio'), 2)}, "
                f"{md_value(s.get('elsewhere_step_energy_median_ratio'), 2)}"
            ),
        ),
        row(
            "plan: first, second, growth, context, first window's lookahead",
            lambda s: "{first}, {second}, {growth}, {context}, {lookahead}".format(**s["window_plan"]),
        ),
    ]
    return (
        f"~{warm['tokens_mean']:.0f}-token pieces, {len(d['runs'])} syntheses, alternating modes. **warm**: the "
        "voice's decoder statistics are known (after warm-up or any earlier piece; every warm run starts "
        "from the warm-up's statistics alone, never from earlier runs of the same sentences); **cold**: "
        "the voice's first piece.\n\n"
        + md_table(["metric", "warm", "cold"], rows)
        + "\n\nThe decoder is deterministic (two whole-piece calls give identical samples), so any distance "
        "is the windowing's. Spectrograms around the first seams, whole piece (top) and windowed, warm "
        "(bottom):\n\n![seams](img/seams.png)"
    )


if __name__ == "__main__":
    main()
