"""Capacity: how many real-time listeners one machine keeps fed, and what one too many does to the rest.

K listeners join one second apart, each with an eight-sentence answer written at LLM pace into one
session. A simulated real-time player per listener starts at its first audio and never skips; a listener
is *kept fed* when its speech is heard within 1 s and its player waits at most 100 ms in total. Compared
side by side in one run, each on a fresh server:

- ``default``: the server as shipped: the deadline scheduler and admission (``queue``) counting what this
  machine sustains (0.85 of the audio its full windows make per second);
- ``fifo``: one model worker with all cores, arrival order, no admission (the baseline);
- ``deadline``: the same worker, earliest playback deadline first, no admission;
- ``deadline-2w``: two model workers with one ONNX Runtime thread each;
- ``deadline-batch``: ``--batch`` model workers (2) sharing one batched decoder
  (``STREAMVOICE_DECODE_BATCH``): windows of one size from several listeners go in one call;
- ``admission``: ``default`` with a longer bound on the wait (30 s): listeners beyond the measured capacity
  wait (told at once) and are served when a slot frees, instead of slowing everyone.

Also per option: throughput at saturation (audio seconds produced per wall second with ``--max-k``
listeners sending whole answers at once) against the single-call limit (one call after another: 1 / RTF).

``--trace`` records every decoded window (its size, its cost, what its listener had buffered) in the
JSON, beside each listener's stalls: what explains a run where someone stalls.

``--repeat N`` runs each K N times on the same server (one run can mislead: a load near the machine's limit
can go either way) and adds a table of how many runs kept everyone fed. ``--cpu-load F`` runs a busy loop
beside the server that takes F of one core, as a local LLM or a noisy neighbour would: a machine that is
suddenly slower than the one the server measured is where schedulers fall apart.

Run: ``python -m streamvoice.bench.capacity [--ks 1,2,3,4,5,6] [--options fifo,deadline,...] [--repeat N]
[--cpu-load F] [--plot P]``
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

from streamvoice.bench.arrival_order import use_arrival_order
from streamvoice.bench.capacity_runs import (
    HEARD_TARGET_S,
    OPTIONS,
    REPEAT_COLUMNS,
    STAGGER_S,
    STALL_TARGET_S,
    kept_fed,
    kokoro_onnx_limit,
    repeats,
    run_k,
    saturate,
    single_call_limit,
    summarise,
    trace_rows,
)
from streamvoice.bench.co_tenant import co_tenant
from streamvoice.bench.common import table, write_result
from streamvoice.bench.loopback import LoopbackServer
from streamvoice.bench.tables import md_table, md_value
from streamvoice.engine import KokoroEngine
from streamvoice.server import ServerConfig, create_app
from streamvoice.server.core.load import DecodedWindow


def main(argv: list[str] | None = None, result: str = "capacity") -> dict[str, Any]:
    """``result``: the name of the JSON it writes (``bench.gpu`` keeps its served runs apart from section 4's)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ks", default="1,2,3,4,5,6", help="listener counts")
    parser.add_argument("--options", default=",".join(OPTIONS), help=f"any of {', '.join(OPTIONS)}")
    parser.add_argument("--rate", type=float, default=50.0, help="LLM tokens per second")
    parser.add_argument(
        "--stagger", type=float, default=STAGGER_S, help="seconds between listeners joining (a GPU: less)"
    )
    parser.add_argument("--providers", default=None, help="ONNX Runtime execution providers, comma-separated")
    parser.add_argument(
        "--variant", default=None, help="MODEL_VARIANT: int8, int8-static, fp32 (default: as served)"
    )
    parser.add_argument("--batch", type=int, default=2, help="windows per decoder call for deadline-batch")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each K on the same server")
    parser.add_argument(
        "--cpu-load", type=float, default=0.0, help="busy loop beside the server, share of one core"
    )
    parser.add_argument("--plot", type=Path, default=None)
    parser.add_argument(
        "--trace", action="store_true",
        help="record every decoded window (size, cost, the listener's buffer) per run, in the JSON",
    )  # fmt: skip
    args = parser.parse_args(argv)
    with co_tenant(args.cpu_load):
        return measure(args, result)


def measure(args: argparse.Namespace, result: str = "capacity") -> dict[str, Any]:
    ks = [int(k) for k in args.ks.split(",")]
    providers = tuple(args.providers.split(",")) if args.providers else None

    rows: list[dict[str, Any]] = []
    throughput: list[dict[str, Any]] = []
    raw: dict[str, Any] = {}
    payload = {
        "rate": args.rate,
        "stagger_s": args.stagger,
        "ks": ks,
        "repeat": args.repeat,
        "cpu_load": args.cpu_load,
        "variant": args.variant,
        "rows": rows,
        "throughput": throughput,
        "raw": raw,
    }
    for option in args.options.split(","):
        settings = dict(OPTIONS[option])
        if "decode_batch" in settings:
            settings["decode_batch"] = args.batch
        config = ServerConfig(max_sessions=256, **settings)
        options = config.engine_options
        if providers:
            from dataclasses import replace

            options = replace(options, providers=providers)
        engine = KokoroEngine.load(None, args.variant, options)
        limit = single_call_limit(engine)
        shipped = kokoro_onnx_limit(engine)
        app = create_app(config, engine=engine)
        with LoopbackServer(app) as server:
            service = app.state.service
            if option == "fifo":
                use_arrival_order(service)
            asyncio.run(run_k(server.url, 1, args.rate))  # warm-up: the decoding speed is measured
            for k in ks:
                for run in range(args.repeat):
                    trace: list[DecodedWindow] = []
                    service.load.window_watchers[:] = [trace.append] if args.trace else []
                    began = time.monotonic()
                    listeners = asyncio.run(run_k(server.url, k, args.rate, args.stagger))
                    key = f"{option}/{k}" + (f"/{run}" if args.repeat > 1 else "")
                    raw[key] = listeners
                    if args.trace:
                        raw[key + "/trace"] = trace_rows(trace, began)
                    rows.append({**summarise(option, k, listeners), "run": run})
                    print(
                        f"  {option} K={k}: fed {rows[-1]['fed']}/{k}, refused {rows[-1]['refused']}, "
                        f"all stalls {rows[-1]['stall_sum_ms']:.0f} ms, capacity {service.load.capacity()}, "
                        f"rtf {service.load.decode_speed.rtf:.3f}, window {service.load.window_cost.fixed_s * 1000:.0f} ms + "
                        f"{service.load.window_cost.per_frame_s * 1000:.2f} ms/frame",
                        flush=True,
                    )
                    write_result(result, {**payload, "complete": False})  # a run cut short keeps its rows
            saturated = asyncio.run(saturate(server.url, max(ks)))
        calls, windows = engine.batch_counts
        throughput.append(
            {
                "option": option,
                "single_call_audio_per_s": limit,
                "kokoro_onnx_audio_per_s": shipped,
                "decoder": engine.decoder_graph,
                "saturated_audio_per_s": saturated,
                "ratio": saturated / limit,
                "windows_per_call": windows / calls if calls else None,  # decoder batching only
                "real_time_listeners": kept_fed(rows, option),
            }
        )
        write_result(result, {**payload, "complete": False})  # a long run loses nothing
    beside = f", a busy loop on {args.cpu_load:g} of one core beside the server" if args.cpu_load else ""
    print(
        f"\nK listeners joining {args.stagger:g} s apart, eight-sentence answers at {args.rate:g} tokens/s{beside}\n"
    )
    print(
        table(
            rows,
            [
                ("option", "option"),
                ("k", "K"),
                ("admitted", "admitted"),
                ("queued", "queued"),
                ("refused", "refused"),
                ("heard_p50", "heard p50 ms"),
                ("heard_p95", "p95"),
                ("heard_max", "max"),
                ("stall_max_ms", "worst listener stalls ms"),
                ("stall_sum_ms", "all stalls ms"),
                ("told_max_ms", "told queued/refused ms"),
                ("all_fed", "every admitted fed"),
            ],
        )
    )
    print()
    print(
        table(
            throughput,
            [
                ("option", "option"),
                ("real_time_listeners", "listeners kept fed"),
                ("decoder", "decoder"),
                ("single_call_audio_per_s", "single-call limit audio s/s"),
                ("kokoro_onnx_audio_per_s", "kokoro-onnx create() audio s/s"),
                ("saturated_audio_per_s", f"{max(ks)} at once audio s/s"),
                ("ratio", "ratio"),
                ("windows_per_call", "windows per batched call"),
            ],
        )
    )
    if args.repeat > 1:
        payload["repeats"] = repeats(rows)
        print()
        print(table(payload["repeats"], REPEAT_COLUMNS))
    if args.plot:
        draw(rows, args.plot)
    print("wrote", write_result(result, payload))
    return payload


def draw(rows: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.parent.mkdir(parents=True, exist_ok=True)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    for option in dict.fromkeys(r["option"] for r in rows):
        ks = sorted({r["k"] for r in rows if r["option"] == option})
        worst = [[r for r in rows if r["option"] == option and r["k"] == k] for k in ks]  # over repeats
        left.plot(ks, [max(r["stall_max_ms"] for r in runs) for runs in worst], marker="o", label=option)
        right.plot(ks, [max(r["heard_p95"] or 0 for r in runs) for runs in worst], marker="o", label=option)
    left.axhline(STALL_TARGET_S * 1000, color="grey", ls="--", lw=0.8)
    right.axhline(HEARD_TARGET_S * 1000, color="grey", ls="--", lw=0.8)
    left.set_yscale("symlog", linthresh=10)
    left.set_ylim(bottom=0)
    left.set(xlabel="listeners", ylabel="worst admitted listener's stalls (ms)")
    for ax in (left, right):
        ax.set_xticks(sorted({r["k"] for r in rows}))
    right.set(xlabel="listeners", ylabel="heard onset p95 (ms)")
    left.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def report(d: dict[str, Any], plot: str | None = "img/capacity.png") -> str:
    """Section 4's text; ``plot``: the figure its registry run draws (None where another run is shown)."""
    if "throughput" not in d:  # a result from before the options were compared
        return "_rerun: this result predates the current benchmark_\n"
    rows = [
        [
            r["option"],
            str(r["k"]),
            str(r["admitted"]),
            str(r.get("queued", 0)),
            str(r["refused"]),
            md_value(r["heard_p50"]),
            md_value(r["heard_p95"]),
            md_value(r["heard_max"]),
            md_value(r["stall_max_ms"]),
            md_value(r["stall_sum_ms"]),
            md_value(r["told_max_ms"]),
            md_value(r["all_fed"]),
        ]
        for r in d["rows"]
    ]
    best = max(t["single_call_audio_per_s"] for t in d["throughput"])
    limits = [
        [
            t["option"],
            str(t["real_time_listeners"]),
            md_value(t["single_call_audio_per_s"], 2),
            md_value(t["saturated_audio_per_s"], 2),
            md_value(t["ratio"], 2),
            md_value(t["saturated_audio_per_s"] / best, 2),
            md_value(t.get("windows_per_call"), 2),
            t.get("decoder", "exported"),
            md_value(t.get("kokoro_onnx_audio_per_s"), 2),
            md_value(t["saturated_audio_per_s"] / t["kokoro_onnx_audio_per_s"], 2)
            if t.get("kokoro_onnx_audio_per_s")
            else "-",
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
        + md_table(
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
        + md_table(
            [
                "option",
                "listeners kept fed",
                "single-call limit (audio s/s)",
                "at saturation (audio s/s)",
                "ratio",
                "of the best single-call limit",
                "windows per batched call",
                "decoder",
                "kokoro-onnx create() (audio s/s)",
                "at saturation / kokoro-onnx",
            ],
            limits,
        )
        + _repeats(d)
        + (f"\n\n![capacity]({plot})" if plot else "")
    )


def _repeats(d: dict[str, Any]) -> str:
    if not d.get("repeats"):
        return ""
    rows = [
        [r["option"], str(r["k"]), str(r["runs"]), str(r["fed_runs"]), md_value(r["stall_sum_median_ms"]),
         md_value(r["stall_sum_max_ms"])]
        for r in d["repeats"]
    ]  # fmt: skip
    return f"\n\nEach K was run {d['repeat']} times on the same server:\n\n" + md_table(
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


if __name__ == "__main__":
    main()
