"""What ``bench.capacity`` measures, run by run: K listeners staggered into one server, each played by a
real-time player; who was kept fed, what one too many did, and the engine's limits beside them."""

from __future__ import annotations

import asyncio
import itertools
import statistics
import time
from typing import Any

from streamvoice.bench.common import stats
from streamvoice.bench.continuity import playback, run_answer
from streamvoice.client import SpeechClient
from streamvoice.engine import KokoroEngine
from streamvoice.protocol import ProtocolError
from streamvoice.server.core.load import DecodedWindow

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


async def listener(url: str, i: int, rate: float, stagger: float = STAGGER_S) -> dict[str, Any]:
    await asyncio.sleep(i * stagger)
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


async def run_k(url: str, k: int, rate: float, stagger: float = STAGGER_S) -> list[dict[str, Any]]:
    return list(await asyncio.gather(*(listener(url, i, rate, stagger) for i in range(k))))


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
