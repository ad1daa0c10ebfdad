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
import contextlib
import itertools
import multiprocessing
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from streamvoice.bench.common import stats, table, write_result
from streamvoice.bench.continuity import playback, run_answer
from streamvoice.bench.loopback import LoopbackServer
from streamvoice.bench.tables import md_table, md_value
from streamvoice.client import SpeechClient
from streamvoice.engine import KokoroEngine
from streamvoice.protocol import ProtocolError
from streamvoice.server import ServerConfig, create_app
from streamvoice.server.core.load import DecodedWindow
from streamvoice.server.core.scheduler import SynthesisScheduler
from streamvoice.server.core.service import SpeechService
from streamvoice.server.core.window_sizing import LARGEST_WINDOW_FRAMES, WindowCost

ANSWER = (
    "Your order shipped this morning from our warehouse in Denver. "
    "The courier expects to deliver it on Thursday, before six in the evening. "
    "You will get a text message with a tracking link within the hour. "
    "If you are not home, the driver will leave the parcel with a neighbour or at the depot. "
    "You can also pick a safe place for it in the tracking page. "
    "The box is about the size of a shoebox and weighs just under two kilos. "
    "Keep the receipt in case you want to return anything within thirty days. "
    "If anything changes, we will let you know right away."
)
STAGGER_S = 1.0
HEARD_TARGET_S = 1.0
STALL_TARGET_S = 0.1  # total waiting of a listener's player
OPTIONS: dict[str, dict[str, Any]] = {
    "default": {},  # as shipped: deadline scheduling and admission (queue) on the measured capacity
    "fifo": {"admission": "off"},  # on the arrival-order scheduler (``ArrivalOrder``)
    "deadline": {"admission": "off"},
    "deadline-2w": {"synth_workers": 2, "ort_threads": 1, "admission": "off"},
    "deadline-batch": {"decode_batch": 2, "admission": "off"},
    "admission": {"admission": "queue", "admission_wait_s": 30.0},
}
FIFO_SHARED_WINDOW_FRAMES = 24  # arrival order knows no deadlines: a fixed window while others wait


class ArrivalOrder(SynthesisScheduler):
    """The baseline the deadline scheduler is measured against: model jobs in arrival order (a job that hands
    its worker back between windows keeps its arrival key, so it stays first), the largest window when nobody
    waits and a fixed one when someone does. The server ships only the deadline order; this is composed here."""

    def order_key(self, deadline: float | None, now: float) -> float:
        return now

    def requeue_key(self, key: float, deadline: float) -> float:
        return key

    @staticmethod
    def window_cap(
        cost: WindowCost,
        own_s: float,
        waiting_s: float | None,
        listeners: int,
        overloaded: bool,
        batched: bool,
    ) -> int:
        return LARGEST_WINDOW_FRAMES if waiting_s is None else FIFO_SHARED_WINDOW_FRAMES


def use_arrival_order(service: SpeechService) -> None:
    """Swap a started server's scheduler for the arrival-order baseline (nothing is queued at the swap)."""
    shipped = service.scheduler
    service.scheduler = ArrivalOrder(workers=shipped.workers)
    service.scheduler.start()
    shipped.stop()


async def listener(url: str, i: int, rate: float) -> dict[str, Any]:
    await asyncio.sleep(i * STAGGER_S)
    joined = time.monotonic()
    run = await run_answer(url, ANSWER, rate)
    refused = [p for p in run["pieces"] if p.get("error") == "server_busy"]
    play = playback(run["chunks"])
    return {
        "joined": joined,
        "stall_spans": stall_spans(play["spans"]),
        "heard_s": run["heard_s"],
        "starvation_s": play["starvation_s"],
        "audio_s": sum(s for _, s in run["chunks"]),
        "refused": bool(refused),
        "queued": run.get("told_s") is not None and not refused,  # told to wait, then served
        "told_s": run.get("told_s"),
    }


def stall_spans(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Where the player waited: (start, seconds), from the first audio."""
    return [(end, start - end) for (_, end), (start, _) in itertools.pairwise(spans) if start > end + 1e-3]


async def run_k(url: str, k: int, rate: float) -> list[dict[str, Any]]:
    return list(await asyncio.gather(*(listener(url, i, rate) for i in range(k))))


async def saturate(url: str, k: int) -> float:
    """Audio seconds per wall second with ``k`` whole answers requested at once."""

    async def one() -> float:
        async with await SpeechClient.connect(url) as client:
            try:
                result = await client.speak(ANSWER, format="pcm")
            except ProtocolError:  # refused by admission: produced nothing
                return 0.0
        return len(result.audio) / 2 / 24_000

    started = time.perf_counter()
    audio = await asyncio.gather(*(one() for _ in range(k)))
    return sum(audio) / (time.perf_counter() - started)


def single_call_limit(engine: KokoroEngine) -> float:
    """One whole-piece call after another, nothing else running: audio seconds per wall second."""
    engine.synthesize("Warm up.")
    started = time.perf_counter()
    audio_s = sum(chunk.size for chunk in engine.stream(ANSWER)) / engine.sample_rate
    return audio_s / (time.perf_counter() - started)


def kokoro_onnx_limit(engine: KokoroEngine) -> float:
    """kokoro-onnx as shipped on the same file (its ``create()``, its session), one call after another on the
    same answer: audio seconds per wall second; what the served path at saturation is compared with."""
    from kokoro_onnx import Kokoro

    shipped = Kokoro(str(engine.files.model), str(engine.files.voices))
    shipped.create("Warm up.", voice="af_heart", lang="en-us")
    started = time.perf_counter()
    audio, rate = shipped.create(ANSWER, voice="af_heart", lang="en-us")
    return len(audio) / rate / (time.perf_counter() - started)


def trace_rows(trace: list[DecodedWindow], began: float) -> list[dict[str, Any]]:
    """The service's window trace, times from the run's start, lanes numbered in order of appearance."""
    lanes: dict[int, int] = {}
    return [
        {
            "t": round(w.at - began, 3),
            "lane": lanes.setdefault(w.lane, len(lanes)),
            "frames": w.frames,
            "work_s": round(w.work_s, 4),
            "buffered_s": round(w.buffered_s, 3),
            "piece_start": w.piece_start,
            "active": w.active,
        }
        for w in trace
    ]


def summarise(option: str, k: int, listeners: list[dict[str, Any]]) -> dict[str, Any]:
    """Admitted: served without waiting; queued listeners were told to wait and are counted apart."""
    admitted = [s for s in listeners if not s["refused"] and not s.get("queued")]
    heard = [s["heard_s"] * 1000 for s in admitted if s["heard_s"] is not None]
    h = stats(heard)
    fed = [
        s for s in admitted if s["heard_s"] is not None and s["heard_s"] <= HEARD_TARGET_S
        and s["starvation_s"] <= STALL_TARGET_S
    ]  # fmt: skip
    told = [s["told_s"] for s in listeners if s["told_s"] is not None]
    return {
        "option": option,
        "k": k,
        "admitted": len(admitted),
        "queued": sum(1 for s in listeners if s.get("queued")),
        "refused": sum(1 for s in listeners if s["refused"]),
        "heard_p50": h.get("p50"),
        "heard_p95": h.get("p95"),
        "heard_max": h.get("max"),
        "stall_max_ms": max((s["starvation_s"] for s in admitted), default=0.0) * 1000,
        "stall_sum_ms": sum(s["starvation_s"] for s in admitted) * 1000,
        "told_max_ms": max(told) * 1000 if told else None,
        "all_fed": len(fed) == len(admitted) and bool(admitted),
        "fed": len(fed),
    }


def kept_fed(rows: list[dict[str, Any]], option: str) -> int:
    """The most listeners served at once with every one of them kept fed, in every run of that K."""
    by_k: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        if r["option"] == option:
            by_k.setdefault(r["k"], []).append(r)
    return max(
        (min(r["admitted"] for r in runs) for runs in by_k.values() if all(r["all_fed"] for r in runs)),
        default=0,
    )


def repeats(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per option and K over its runs: how many kept every admitted listener fed, and the stalls."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["option"], r["k"]), []).append(r)
    return [
        {
            "option": option,
            "k": k,
            "runs": len(runs),
            "fed_runs": sum(r["all_fed"] for r in runs),
            "stall_sum_median_ms": statistics.median(r["stall_sum_ms"] for r in runs),
            "stall_sum_max_ms": max(r["stall_sum_ms"] for r in runs),
        }
        for (option, k), runs in groups.items()
    ]


REPEAT_COLUMNS = [
    ("option", "option"),
    ("k", "K"),
    ("runs", "runs"),
    ("fed_runs", "runs with every admitted listener fed"),
    ("stall_sum_median_ms", "all stalls ms, median run"),
    ("stall_sum_max_ms", "worst run"),
]


def busy_loop(duty: float, period_s: float = 0.1) -> None:
    """Spin ``duty`` of every period and sleep the rest: a steady co-tenant on one core."""
    while True:
        start = time.perf_counter()
        while time.perf_counter() - start < duty * period_s:
            pass
        time.sleep((1.0 - duty) * period_s)


@contextlib.contextmanager
def co_tenant(load: float) -> Iterator[None]:
    """A process taking ``load`` of one core for as long as the block runs (none for 0)."""
    if not 0.0 <= load <= 1.0:
        raise ValueError(f"--cpu-load is a fraction of one core, 0 to 1; got {load}")
    if load == 0.0:
        yield
        return
    process = multiprocessing.get_context("spawn").Process(target=busy_loop, args=(load,), daemon=True)
    process.start()
    try:
        yield
    finally:
        process.terminate()
        process.join()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ks", default="1,2,3,4,5,6", help="listener counts")
    parser.add_argument("--options", default=",".join(OPTIONS), help=f"any of {', '.join(OPTIONS)}")
    parser.add_argument("--rate", type=float, default=50.0, help="LLM tokens per second")
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
        return measure(args)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    ks = [int(k) for k in args.ks.split(",")]
    providers = tuple(args.providers.split(",")) if args.providers else None

    rows: list[dict[str, Any]] = []
    throughput: list[dict[str, Any]] = []
    raw: dict[str, Any] = {}
    payload = {
        "rate": args.rate,
        "stagger_s": STAGGER_S,
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
                    listeners = asyncio.run(run_k(server.url, k, args.rate))
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
        write_result("capacity", {**payload, "complete": False})  # a long run loses nothing
    beside = f", a busy loop on {args.cpu_load:g} of one core beside the server" if args.cpu_load else ""
    print(
        f"\nK listeners joining {STAGGER_S:g} s apart, eight-sentence answers at {args.rate:g} tokens/s{beside}\n"
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
    print("wrote", write_result("capacity", payload))
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


def report(d: dict[str, Any]) -> str:
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
        + "\n\n![capacity](img/capacity.png)"
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
