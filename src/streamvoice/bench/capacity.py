"""Capacity: K concurrent sessions, each fed at LLM pace, FIFO vs deadline scheduling.

Sessions arrive one second apart (so new sessions meet others mid-answer, where scheduling matters);
each gets a four-sentence answer at 50 tokens/s. Reported per K and policy: p50/p95 time to first audio
and total playback starvation across sessions; the largest K with p95 first audio <= 1 s and no starvation.

Run: ``python -m streamvoice.bench.capacity [--max-k 4]``
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from streamvoice.asgi import LoopbackServer
from streamvoice.bench.common import stats, table, write_result
from streamvoice.bench.continuity import playback, run_answer
from streamvoice.engine import KokoroEngine
from streamvoice.server import ServerConfig, create_app

ANSWER = (
    "Your order shipped this morning from our warehouse in Denver. "
    "The courier expects to deliver it on Thursday, before six in the evening. "
    "You will get a text message with a tracking link within the hour. "
    "If anything changes, we will let you know right away."
)
STAGGER_S = 1.0
STARVATION_TOLERANCE_S = 0.05  # below this a player would not notice (one audio frame of jitter)


async def run_k(url: str, k: int, rate: float) -> list[dict[str, Any]]:
    async def session(i: int) -> dict[str, Any]:
        await asyncio.sleep(i * STAGGER_S)
        run = await run_answer(url, ANSWER, rate)
        play = playback(run["chunks"])
        return {
            "first_audio_s": run["first_audio_s"],
            "heard_s": run["heard_s"],
            "starvation_s": play["starvation_s"],
        }

    return list(await asyncio.gather(*(session(i) for i in range(k))))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-k", type=int, default=4)
    parser.add_argument("--rate", type=float, default=50.0)
    args = parser.parse_args(argv)

    engine = KokoroEngine.load()
    rows = []
    raw: dict[str, Any] = {}
    for policy in ("fifo", "deadline"):
        with LoopbackServer(
            create_app(ServerConfig(scheduler=policy, max_sessions=256), engine=engine)
        ) as server:
            asyncio.run(run_k(server.url, 1, args.rate))  # warm-up
            for k in range(1, args.max_k + 1):
                sessions = asyncio.run(run_k(server.url, k, args.rate))
                raw[f"{policy}/{k}"] = sessions
                first = stats([s["first_audio_s"] * 1000 for s in sessions])
                heard = stats([s["heard_s"] * 1000 for s in sessions if s["heard_s"] is not None])
                starve = sum(s["starvation_s"] for s in sessions)
                rows.append(
                    {
                        "policy": policy,
                        "k": k,
                        "first_p50": first["p50"],
                        "first_p95": first["p95"],
                        "heard_p95": heard.get("p95"),
                        "starvation_ms": starve * 1000,
                        "ok": first["p95"] <= 1000
                        and all(s["starvation_s"] <= STARVATION_TOLERANCE_S for s in sessions),
                    }
                )
    print(f"K sessions arriving {STAGGER_S:g} s apart, each answer at {args.rate:g} tokens/s, 2 cores\n")
    print(
        table(
            rows,
            [
                ("policy", "policy"),
                ("k", "K"),
                ("first_p50", "first audio p50 ms"),
                ("first_p95", "p95 ms"),
                ("heard_p95", "heard onset p95 ms"),
                ("starvation_ms", "starvation ms (sum)"),
                ("ok", "p95<=1s & no starvation"),
            ],
        )
    )
    best = {
        p: max([r["k"] for r in rows if r["policy"] == p and r["ok"]], default=0)
        for p in ("fifo", "deadline")
    }
    print(f"\nlargest K meeting the target: fifo {best['fifo']}, deadline {best['deadline']}")
    path = write_result(
        "capacity", {"rate": args.rate, "stagger_s": STAGGER_S, "rows": rows, "best_k": best, "raw": raw}
    )
    print(f"wrote {path}")
    return {"rows": rows, "best_k": best}


if __name__ == "__main__":
    main()
