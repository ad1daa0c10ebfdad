"""Render docs/benchmarks.md from results/*.json, so every number in the doc comes from a run.

Run: ``python -m streamvoice.bench.report [--results results] [--out docs/benchmarks.md]``
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from streamvoice.bench.registry import BENCHMARKS


def _load(folder: Path, name: str) -> dict[str, Any] | None:
    path = folder / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _n(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return f"{value:,.{digits}f}"
    return str(value)


def _table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def transport(d: dict[str, Any]) -> str:
    rows = [
        [
            r["case"],
            _n(r["mean"], 1),
            _n(r["p50"], 1),
            _n(r["p95"], 1),
            f"{r['of_baseline']:.1%}",
            _n(r.get("overhead"), 2),
            _n(r.get("heard_mean"), 1),
        ]
        for r in d["rows"]
    ]
    return (
        f"Texts: the AWS reference sample's shape, a {len(d['texts']['whole block'])}-character four-sentence block; "
        f'first sentence: "{d["texts"]["first sentence"]}"; our fast first piece: "{d["texts"]["fast first piece"]}". '
        f"{d['trials']} trials each, all measurements interleaved in one loop.\n\n"
        + _table(
            [
                "case",
                "first byte mean ms",
                "p50 ms",
                "p95 ms",
                "of the reference design",
                "session / bare engine",
                "heard onset mean ms",
            ],
            rows,
        )
        + f"\n\nAWS reference sample (published, {d['reference']['hardware']}): whole block {d['reference']['whole_block_ms']} ms, first sentence "
        f"{d['reference']['first_sentence_ms']} ms "
        f"({d['reference']['first_sentence_ms'] / d['reference']['whole_block_ms']:.1%} of the block)."
    )


def profile(d: dict[str, Any]) -> str:
    rows = [
        [
            r["step"],
            _n(r["ms"], 2 if r["ms"] < 10 else 0),
            _n(r["per_frame_ms"], 2) if r.get("per_frame_ms") else "",
        ]
        for r in d["rows"]
    ]
    return (
        f"One {d['tokens']}-token piece, {d['audio_s']:.2f} s of audio; medians.\n\n"
        + _table(["step", "ms", "ms per 25 ms frame"], rows)
        + (_decoder_prose(d["decoder"]) if d.get("decoder") else "\n\n")
        + "`python -m streamvoice.bench.profile --flame docs/img/flame.svg` records a py-spy flame graph of a "
        "real server on loopback answering a client (MP3) for 20 s, start-up included: `SplitKokoro.decode` "
        "(ONNX Runtime's `Session.run`, on the model worker thread) against the event loop (WebSocket, "
        "encoding, scheduling) and the warm-up. ONNX Runtime's own frames show as addresses: the wheel ships "
        "without symbols.\n\n"
        "![flame graph](img/flame.svg)"
    )


def _decoder_prose(c: dict[str, float]) -> str:
    return (
        f"\n\nThe decoder is {c['share_of_whole_call']:.0%} of a whole-piece call: a fixed "
        f"{c['fixed_ms']:.0f} ms per call, then {c['ms_per_frame']:.1f} ms per 25 ms frame (the whole call's "
        f"real-time factor: {c['real_time_factor']:.2f}). The phonemiser, planning and encoders are noise next "
        "to it, so the first audio of a piece costs the front plus one small window, and each extra window "
        "costs the fixed part plus its context again.\n\n"
    )


def windows(d: dict[str, Any]) -> str:
    warm = d["summary"]
    cold = warm.get("cold", {})

    def row(label: str, value: Any) -> list[str]:
        return [label, value(warm), value(cold) if cold else "-"]

    rows = [
        row("whole-piece synthesis (ms, mean)", lambda s: _n(s["whole_ms"]["mean"])),
        row("windowed: first audio (ms, mean)", lambda s: _n(s["first_ms"]["mean"])),
        row("first audio / whole piece (target <= 35%)", lambda s: f"{s['first_over_whole']:.1%}"),
        row("windowed: all audio (ms, mean)", lambda s: _n(s["total_ms"]["mean"])),
        row("total / whole piece (target <= 1.15x)", lambda s: f"{s['total_over_whole']:.2f}x"),
        row("worst lateness of a window vs real-time playback (ms)", lambda s: _n(s["max_lateness_ms"])),
        row("same length as whole-piece audio", lambda s: _n(s["all_same_length"])),
        row(
            "word error rate, whole / windowed",
            lambda s: f"{_n(s['wer_whole'], 3)} / {_n(s['wer_windowed'], 3)}",
        ),
        row(
            "log-spectral distance windowed vs whole (dB, speech frames)",
            lambda s: _n(s["log_spectral_distance_db"]["mean"], 2),
        ),
        row(
            "HF step energy windowed / whole, summed: at seams, elsewhere",
            lambda s: f"{_n(s['seam_step_energy_ratio'], 2)}, {_n(s['elsewhere_step_energy_ratio'], 2)}",
        ),
        row(
            "HF step energy windowed / whole, median per position: at seams, elsewhere",
            lambda s: (
                f"{_n(s.get('seam_step_energy_median_ratio'), 2)}, "
                f"{_n(s.get('elsewhere_step_energy_median_ratio'), 2)}"
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
        + _table(["metric", "warm", "cold"], rows)
        + "\n\nThe decoder is deterministic (two whole-piece calls give identical samples), so any distance "
        "is the windowing's. Spectrograms around the first seams, whole piece (top) and windowed, warm "
        "(bottom):\n\n![seams](img/seams.png)"
    )


def e2e(d: dict[str, Any]) -> str:
    rows = [
        [
            r["source"],
            r["mode"],
            _n(r["first_audio_p50"]),
            _n(r.get("heard_p50")),
            _n(r.get("text_to_heard_p50")),
            _n(r["total_p50"]),
            _n(r["batch_over_mode"], 2) + "x",
            _n(r.get("batch_over_mode_heard"), 2) + "x",
            str(r["errors"]),
        ]
        for r in d["rows"]
    ]
    return (
        f"{d['runs']} runs per mode, alternating order. Heard onset: when a player starting at the first byte "
        "plays the first audible sample; from the LLM's first text, the part of the latency that is ours.\n\n"
        + _table(
            [
                "LLM source",
                "mode",
                "first audio p50 ms",
                "heard onset p50 ms",
                "first text to heard p50 ms",
                "total p50 ms",
                "batch / mode",
                "batch / mode, heard",
                "errors",
            ],
            rows,
        )
    )


def continuity(d: dict[str, Any]) -> str:
    rows = [
        [
            r["design"],
            str(r["pieces"]),
            _n(r["first_audio_ms"]),
            _n(r.get("heard_ms")),
            _n(r["starvation_ms"]),
            str(r["stalls"]),
            _n(r["audio_s"], 1),
        ]
        for r in d["rows"]
    ]
    return (
        f"Ten-sentence answer at {d['rate']:g} tokens/s.\n\n"
        + _table(
            ["design", "pieces", "first audio ms", "heard onset ms", "starvation ms", "stalls", "audio s"],
            rows,
        )
        + "\n\nTimeline per piece (generation, synthesis and sending, playback):\n\n![timeline](img/continuity.png)"
    )


def capacity(d: dict[str, Any]) -> str:
    if "throughput" not in d:  # a result from before the options were compared
        return "_rerun: this result predates the current benchmark_\n"
    rows = [
        [
            r["option"],
            str(r["k"]),
            str(r["admitted"]),
            str(r.get("queued", 0)),
            str(r["refused"]),
            _n(r["heard_p50"]),
            _n(r["heard_p95"]),
            _n(r["heard_max"]),
            _n(r["stall_max_ms"]),
            _n(r["stall_sum_ms"]),
            _n(r["told_max_ms"]),
            _n(r["all_fed"]),
        ]
        for r in d["rows"]
    ]
    best = max(t["single_call_audio_per_s"] for t in d["throughput"])
    limits = [
        [
            t["option"],
            str(t["real_time_listeners"]),
            _n(t["single_call_audio_per_s"], 2),
            _n(t["saturated_audio_per_s"], 2),
            _n(t["ratio"], 2),
            _n(t["saturated_audio_per_s"] / best, 2),
            _n(t.get("windows_per_call"), 2),
        ]
        for t in d["throughput"]
    ]
    return (
        f"Listeners join {d['stagger_s']:g} s apart; each eight-sentence answer is written at {d['rate']:g} "
        "tokens/s into one session. Kept fed: heard within 1 s and at most 100 ms of stalls in total. Admitted: "
        "served without waiting; queued: told at once to wait, served when a slot freed (not counted as "
        "admitted); refused: told server_busy."
        + (f" A busy loop took {d['cpu_load']:g} of one core beside the server." if d.get("cpu_load") else "")
        + "\n\n"
        + _table(
            [
                "option",
                "K",
                "admitted",
                "queued",
                "refused",
                "heard p50 ms",
                "p95 ms",
                "max ms",
                "worst listener stalls ms",
                "all stalls ms",
                "told queued/refused ms",
                "every admitted listener fed",
            ],
            rows,
        )
        + "\n\n"
        + _table(
            [
                "option",
                "listeners kept fed",
                "single-call limit (audio s/s)",
                "at saturation (audio s/s)",
                "ratio",
                "of the best single-call limit",
                "windows per batched call",
            ],
            limits,
        )
        + _repeats(d)
        + "\n\n![capacity](img/capacity.png)"
    )


def _repeats(d: dict[str, Any]) -> str:
    if not d.get("repeats"):
        return ""
    rows = [
        [r["option"], str(r["k"]), str(r["runs"]), str(r["fed_runs"]), _n(r["stall_sum_median_ms"]),
         _n(r["stall_sum_max_ms"])]
        for r in d["repeats"]
    ]  # fmt: skip
    return f"\n\nEach K was run {d['repeat']} times on the same server:\n\n" + _table(
        [
            "option",
            "K",
            "runs",
            "runs with every admitted listener fed",
            "all stalls ms, median run",
            "worst run",
        ],
        rows,
    )


def encodings(d: dict[str, Any]) -> str:
    rows = [
        [
            r["format"],
            _n(r["bytes"]),
            _n(r["base64_bytes"]),
            _n(r["kbps"], 1),
            _n(r["encoder_delay_ms"]),
            _n(r["wer"], 3),
            _n(r["reference_bytes"]),
            _n(r["reference_base64"]),
            _n(r["reference_kbps"], 1),
        ]
        for r in d["rows"]
    ]
    return f"{d['clips']} clips, {d['seconds']:.1f} s of speech.\n\n" + _table(
        [
            "format",
            "bytes",
            "base64 bytes",
            "kbps",
            "encoder delay ms",
            "WER",
            "reference bytes",
            "reference base64",
            "reference kbps",
        ],
        rows,
    )


def listener(d: dict[str, Any]) -> str:
    def value(v: Any) -> str:
        if isinstance(v, str):
            return v
        return _n(v, 3) if isinstance(v, float) and abs(v) < 1 else _n(v, 1)

    rows = [[r["measure"].replace("|", "\\|"), value(r["value"]), r["target"]] for r in d["rows"]]
    p = d["pauses"]
    return (
        f"An answer sent as a streaming voice agent sends it (one message per clause or sentence), over one "
        f"session; pauses {p['clause_ms']} / {p['sentence_ms']} / {p['paragraph_ms']} ms after a clause / "
        f'sentence / paragraph. Heard onset: "{d["sentence"]}" ({d["sentence_tokens"]} tokens), {d["trials"]} '
        "fresh sessions. Word timing target as the issue states it: starts within 100 ms of Whisper's on "
        "average, for at least 90% of the words (words timed / words).\n\n"
        + _table(["measure", "value", "target"], rows)
    )


def quality(d: dict[str, Any]) -> str:
    rows = [
        [
            r["voice"],
            _n(r["pesq_first"], 2),
            _n(r["pesq_warm"], 2),
            _n(r["pesq_cold"], 2),
            _n(r["dnsmos_streamed"], 2),
            _n(r["dnsmos_whole"], 2),
        ]
        for r in d["rows"]
    ]
    m = d["summary"]
    rows.append(
        [
            "**mean**",
            _n(m["pesq_first_use"], 2),
            _n(m["pesq_warm"], 2),
            _n(m["pesq_cold"], 2),
            _n(m["dnsmos_streamed"], 2),
            _n(m["dnsmos_whole"], 2),
        ]
    )
    return (
        f"{len(d['sentences'])} sentences per voice, each streamed and compared with the same piece decoded whole. "
        "First use: the voice's very first piece on a fresh engine (statistics from the cache); cold path: "
        "the same piece with no statistics, what the cache avoids.\n\n"
        + _table(
            [
                "voice",
                "PESQ first use",
                "PESQ warm",
                "PESQ cold path",
                "DNSMOS streamed",
                "DNSMOS whole piece",
            ],
            rows,
        )
        + f"\n\nDNSMOS drop from streaming: {m['dnsmos_drop']:.3f}."
    )


def integrations(d: dict[str, Any]) -> str:
    rows = [
        [
            r["group"],
            r["surface"],
            _n(r["first_byte_ms"], 0),
            _n(r["heard_ms"], 0),
            _n(r["heard_p95_ms"], 0),
            "-" if r["text_done_ms"] is None else _n(r["text_done_ms"], 0),
            _n(r["audio_s"], 1),
        ]
        for r in d["rows"]
    ]
    return (
        f"The four-sentence reply through every surface of one server (Wyoming in the same process), PCM "
        f"24 kHz, {d['trials']} trials each (p50 unless marked). Whole text: timed from the request. Streamed "
        f"text: the reply written word by word at {d['tokens_per_s']:g} words/s, timed from the first word; "
        "speech heard before the last word is sent is the point.\n\n"
        + _table(
            ["input", "surface", "first byte ms", "heard ms", "heard p95 ms", "last word sent ms", "audio s"],
            rows,
        )
    )


def batching(d: dict[str, Any]) -> str:
    cost = [
        [
            str(r["window_frames"]),
            str(r["batch"]),
            _n(r["ms_per_call"], 1),
            _n(r["ms_per_window"], 1),
            _n(r["gain_per_window"], 2),
            _n(r["audio_s_per_s"], 2),
        ]
        for r in d["cost"]
    ]
    text = f"Providers: {', '.join(d['providers'])}.\n\n" + _table(
        ["window (frames, + 4 of context each side)", "batch", "ms per call", "ms per window", "gain per window",
         "audio s per s"],
        cost,
    )  # fmt: skip
    if "fidelity" in d:
        rows = [
            [
                r["voice"],
                _n(r["wer_alone"], 2),
                _n(r["wer_batched"], 2),
                _n(r["lsd_batched_vs_alone_db"], 2),
                _n(r["lsd_two_windowings_db"], 2),
                _n(r["mean_batch"], 2),
            ]
            for r in d["fidelity"]
        ]
        text += (
            "\n\nThe same sentences streamed alone and all at once through the batcher (24-frame windows): "
            "word error rate by Whisper against the text, and the log-spectral distance between the two "
            "renditions next to the distance between two windowings of the same piece decoded alone.\n\n"
            + _table(
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


def kernels(d: dict[str, Any]) -> str:
    rows = [
        [r["variant"], str(r["window_frames"]), _n(r["ms"], 1), _n(r["vs_exported"], 2), _n(r["lsd_db"], 2)]
        for r in d["rows"]
    ]
    return (
        f"One decoder call per window ({d['context_frames']} frames of context each side), median time, "
        "for rewrites of the same decoder graph, and the spectral distance of their audio to the "
        "graph as exported.\n\n"
        + _table(
            ["decoder graph", "window (frames)", "ms per window", "time vs exported", "LSD vs exported dB"],
            rows,
        )
    )


RENDERERS = {
    "kernels": kernels,
    "batching": batching,
    "integrations": integrations,
    "listener": listener,
    "quality": quality,
    "profile": profile,
    "transport": transport,
    "windows": windows,
    "e2e": e2e,
    "continuity": continuity,
    "capacity": capacity,
    "encodings": encodings,
}
SECTIONS = [(b.name, b.title, b.command, RENDERERS[b.name]) for b in BENCHMARKS]


def render(folder: Path, preamble: str = "") -> str:
    parts = [preamble]
    machine = None
    for name, title, command, fn in SECTIONS:
        data = _load(folder, name)
        parts.append(f"## {title}\n\n`{command}`\n")
        if data is None:
            parts.append("_not run yet_\n")
            continue
        machine = machine or data.get("machine")
        parts.append(fn(data) + "\n")
    if machine:
        parts.insert(
            1,
            f"Measured on: {machine['processor']}, {machine['cpu_count']} cores, {machine['platform']}, "
            f"Python {machine['python']} ({machine['when']}).\n",
        )
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks.md"))
    parser.add_argument("--preamble", type=Path, default=Path("docs/benchmarks.intro.md"))
    args = parser.parse_args(argv)
    preamble = args.preamble.read_text() if args.preamble.exists() else "# Benchmarks\n"
    args.out.write_text(render(args.results, preamble))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
