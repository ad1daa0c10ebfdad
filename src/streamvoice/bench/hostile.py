"""Another caller's speech while a hostile one's text is being planned: heard onset of an ordinary sentence
on a fresh session, alone and while the attacks of docs/reliability.md's third review run beside it.

The attacks: a 10,000-character hyphen chain on a session (English G2P), and its Latin twin through
``/v1/audio/speech`` with a Mandarin voice (Latin runs go to the English G2P). Before the G2P was bounded,
callers arriving a second later waited 23 s for first audio (0.2 s alone). Also the capacity in listeners
admission counts before and after (planning must not read as slow decoding).

    python -m streamvoice.bench.hostile [--trials 5]      (writes results/hostile.json)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import httpx
from websockets.asyncio.client import connect

from streamvoice.asgi import free_port
from streamvoice.bench.common import heard_onset_s, stats, table, write_result
from streamvoice.bench.loopback import LoopbackServer
from streamvoice.bench.tables import md_table, md_value
from streamvoice.engine import KokoroEngine
from streamvoice.server import ServerConfig
from streamvoice.server.runner import build_server

SENTENCE = "Your table for four is booked for seven tonight."
CHAIN = "-".join(str(i % 10) for i in range(5_000))[:9_999]
LATIN_CHAIN = "-".join("ab" for _ in range(3_300))[:9_999]


async def heard_ms(url: str, text: str = SENTENCE) -> float:
    """Ms from sending ``text`` on a fresh session until a player starting at the first byte is heard."""
    async with connect(url) as ws:
        started = time.monotonic()
        await ws.send(json.dumps({"text": text}))
        arrivals: list[tuple[float, int]] = []
        pcm = bytearray()
        while True:
            frame = await asyncio.wait_for(ws.recv(), 120)
            if isinstance(frame, bytes):
                arrivals.append((time.monotonic(), len(frame)))
                pcm += frame
                continue
            event = json.loads(frame)
            if event["type"] in ("synthesis_complete", "error"):
                heard = heard_onset_s(started, arrivals, bytes(pcm))
                assert heard is not None, event
                return heard * 1000


def _capacity(url: str) -> int:
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        if line.startswith("streamvoice_capacity_listeners "):
            return int(float(line.split()[1]))
    return 0


async def run(trials: int) -> dict[str, Any]:
    engine = KokoroEngine.load()
    port = free_port()
    drainer = build_server(ServerConfig(port=port), engine, log_level="warning")
    server = await asyncio.to_thread(LoopbackServer(drainer.app, port, server=drainer.server).start)
    try:
        await heard_ms(server.ws_url)  # warm the path once
        alone = [await heard_ms(server.ws_url) for _ in range(trials)]
        capacity_before = _capacity(server.url)
        during: list[float] = []
        async with connect(server.ws_url) as attacker, httpx.AsyncClient(timeout=120) as http:
            await attacker.send(json.dumps({"text": CHAIN}))
            speech = http.post(
                server.url + "/v1/audio/speech",
                json={"input": LATIN_CHAIN, "voice": "zf_xiaobei", "response_format": "pcm"},
            )
            attack = asyncio.ensure_future(speech)
            await asyncio.sleep(1.0)
            during = [await heard_ms(server.ws_url) for _ in range(trials)]
            await asyncio.sleep(5.0)  # admission's estimate follows ~30 s of windows: give it time to fall
            capacity_during = _capacity(server.url)
            await attacker.send(json.dumps({"type": "cancel"}))
            attack.cancel()
    finally:
        await asyncio.to_thread(server.stop)
    a, d = stats(alone), stats(during)
    return {
        "trials": trials,
        "heard_onset_ms": {"alone": a, "during_attack": d},
        "ratio_p50": d["p50"] / a["p50"],
        "ratio_max": d["max"] / a["max"],
        "capacity_listeners": {"before": capacity_before, "during_attack": capacity_during},
        "before_the_fix": {"first_audio_ms_during_attack": 23_000, "capacity": "3 -> 1 within ~10 s"},
    }


def report(d: dict[str, Any]) -> str:
    rows = [
        [case, md_value(v["p50"]), md_value(v["max"])]
        for case, v in (
            ("alone", d["heard_onset_ms"]["alone"]),
            ("during the attacks", d["heard_onset_ms"]["during_attack"]),
        )
    ]
    cap = d["capacity_listeners"]
    return (
        md_table(["another caller's sentence, heard onset (ms)", "p50", "max"], rows)
        + f"\n\nDuring / alone: p50 {d['ratio_p50']:.2f}x, max {d['ratio_max']:.2f}x. Listeners admission counts: "
        f"{cap['before']} before, {cap['during_attack']} during the attacks. Before the G2P was bounded, "
        "callers a second behind such an attack waited 23 s for first audio and the capacity fell from 3 to 1.\n"
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args(argv)
    result = asyncio.run(run(args.trials))
    rows = [
        {"case": k, **{m: round(v[m]) for m in ("p50", "p95", "max")}}
        for k, v in result["heard_onset_ms"].items()
    ]
    print(
        table(
            rows,
            [("case", "another caller, heard onset (ms)"), ("p50", "p50"), ("p95", "p95"), ("max", "max")],
        )
    )
    cap = result["capacity_listeners"]
    print(f"during / alone: p50 {result['ratio_p50']:.2f}x, max {result['ratio_max']:.2f}x; "
          f"capacity {cap['before']} -> {cap['during_attack']} listeners")  # fmt: skip
    print(f"wrote {write_result('hostile', result)}")
    return result


if __name__ == "__main__":
    main()
