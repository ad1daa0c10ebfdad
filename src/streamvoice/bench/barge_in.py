"""The answer right after an interruption, and the answer to a reply that simply stops: the two moments a
caller waits for most, against the same server in one run.

1. Barge-in: a long answer is interrupted at a random point (``cancel``, wait for its ``cancelled``), then
   a short answer is asked for; when its speech is heard against a fresh session's for the same text (p95 over
   ``--runs`` interruptions, the two alternating).
2. Quiet text: Home Assistant's order over Wyoming (``synthesize-start``, a chunk per word 120 ms apart,
   then nothing): first audio after the last character, with the quiet cut on (``STREAM_QUIET_CUT_MS``,
   200) and off (0: nothing until ``synthesize-stop``, which is sent after 5 s).

    python -m streamvoice.bench.barge_in [--runs 10]      (writes results/barge_in.json)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time
from typing import Any

from websockets.asyncio.client import connect
from wyoming.audio import AudioChunk
from wyoming.client import AsyncTcpClient
from wyoming.tts import SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice

from streamvoice.asgi import free_port
from streamvoice.bench.common import heard_ms, machine, stats, table, write_result
from streamvoice.bench.loopback import LoopbackServer
from streamvoice.engine import KokoroEngine
from streamvoice.server import ServerConfig
from streamvoice.server.runner import build_server

LONG = (
    "Let me walk you through every option we have for your trip, starting with the morning flights, "
    "then the afternoon trains, and finally the overnight buses that leave from the central station. "
) * 3
SHORT = "Sure, go ahead."
REPLY = "I can book a table for four people at seven thirty this evening."


async def after_barge_in(url: str, rng: random.Random) -> float:
    async with connect(url) as ws:
        await ws.send(json.dumps({"text": LONG, "id": "long"}))
        while isinstance(await asyncio.wait_for(ws.recv(), 60), str):
            pass  # until its first audio
        await asyncio.sleep(rng.uniform(0.2, 3.0))  # the caller interrupts somewhere in the answer
        await ws.send(json.dumps({"type": "cancel"}))
        while True:
            frame = await asyncio.wait_for(ws.recv(), 60)
            if isinstance(frame, str) and json.loads(frame)["type"] in ("error", "synthesis_complete"):
                break
        return await heard_ms(ws, SHORT, "after")


async def fresh_heard(url: str) -> float:
    async with connect(url) as ws:
        return await heard_ms(ws, SHORT, "fresh")


async def _quiet_reply(port: int) -> float | None:
    """Ms from the last character to the first audio; None if none came before synthesize-stop."""
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name="af_heart")).event())
        for word in REPLY.split(" "):
            await client.write_event(SynthesizeChunk(text=word + " ").event())
            last = time.monotonic()
            await asyncio.sleep(0.12)
        try:
            async with asyncio.timeout(5):
                while (event := await client.read_event()) is not None and not AudioChunk.is_type(event.type):
                    pass
            heard: float | None = (time.monotonic() - last) * 1000
        except TimeoutError:
            heard = None
        await client.write_event(SynthesizeStop().event())
        async with asyncio.timeout(60):
            while (event := await client.read_event()) is not None and event.type != "synthesize-stopped":
                pass
        return heard


def _serve(engine: KokoroEngine, **config: Any) -> tuple[LoopbackServer, int]:
    port, wyoming = free_port(), free_port()
    cfg = ServerConfig(port=port, wyoming_uri=f"tcp://127.0.0.1:{wyoming}", **config)
    drainer = build_server(cfg, engine, log_level="warning")
    return LoopbackServer(drainer.app, port, server=drainer.server).start(), wyoming


async def run(runs: int, seed: int) -> dict[str, Any]:
    engine = KokoroEngine.load()
    rng = random.Random(seed)
    server, wyoming = await asyncio.to_thread(_serve, engine)
    try:
        await fresh_heard(server.ws_url)  # warm the path once
        fresh, after = [], []
        for _ in range(runs):
            fresh.append(await fresh_heard(server.ws_url))
            after.append(await after_barge_in(server.ws_url, rng))
        quiet_on = [await _quiet_reply(wyoming) for _ in range(3)]
    finally:
        await asyncio.to_thread(server.stop)
    server, wyoming = await asyncio.to_thread(_serve, engine, stream_quiet_cut_ms=0)
    try:
        quiet_off = [await _quiet_reply(wyoming) for _ in range(2)]
    finally:
        await asyncio.to_thread(server.stop)
    f, a = stats(fresh), stats(after)
    return {
        "machine": machine(),
        "runs": runs,
        "heard_onset_ms": {"fresh": f, "after_barge_in": a},
        "ratio_p50": a["p50"] / f["p50"],
        "ratio_p95": a["p95"] / f["p95"],
        "quiet_reply_ms": {"cut_on": quiet_on, "cut_off": quiet_off},
    }


def _show(values: list[float | None]) -> str:
    return ", ".join("never (until the stop)" if v is None else f"{v:.0f}" for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    result = asyncio.run(run(args.runs, args.seed))
    rows = [
        {"case": k, **{m: round(v[m]) for m in ("p50", "p95", "max")}}
        for k, v in result["heard_onset_ms"].items()
    ]
    print(table(rows, [("case", "heard onset (ms)"), ("p50", "p50"), ("p95", "p95"), ("max", "max")]))
    print(f"after a barge-in / fresh: p50 {result['ratio_p50']:.2f}x, p95 {result['ratio_p95']:.2f}x")
    q = result["quiet_reply_ms"]
    print(f"a streamed reply that stops, last character to first audio (ms): quiet cut {_show(q['cut_on'])}; "
          f"without it {_show(q['cut_off'])}")  # fmt: skip
    print(f"wrote {write_result('barge_in', result)}")


if __name__ == "__main__":
    main()
