"""A tenant's speech while strangers flood the server with wrong keys (issue #67): heard onset of an ordinary
sentence on a fresh session with a good key, alone, beside a flood of ``GET /ping`` (what any flood of HTTP
requests costs a 2-core machine), and beside a flood of the same rate of speech requests with guessed keys
(each answered 401 from the in-memory key ring: one hash, no store call). The two floods run in another
process, ``--flood-workers`` connections each sending as fast as answers come.

    python -m streamvoice.bench.key_flood [--trials 5]      (writes results/key_flood.json)
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import connect

from streamvoice.asgi import free_port
from streamvoice.bench.common import heard_ms, stats, table, write_result
from streamvoice.bench.loopback import LoopbackServer
from streamvoice.bench.tables import md_table, md_value
from streamvoice.engine import KokoroEngine
from streamvoice.server import ServerConfig
from streamvoice.server.runner import build_server
from streamvoice.store import open_store
from streamvoice.store.keys import KeyRecords

SENTENCE = "Your table for four is booked for seven tonight."
TOKEN = "bench-bootstrap"


def _flood(url: str, wrong_keys: bool, workers: int, seconds: float, sent: Any) -> None:
    """Another process: ``workers`` connections asking as fast as they are answered, for ``seconds``."""

    async def one(i: int, deadline: float) -> int:
        count = 0
        async with httpx.AsyncClient(timeout=30) as http:
            while time.monotonic() < deadline:
                if wrong_keys:
                    answer = await http.post(
                        url + "/v1/audio/speech",
                        json={"input": "Hi.", "voice": "af_heart"},
                        headers={"Authorization": f"Bearer sk_sv_guess{i}-{count}"},
                    )
                    assert answer.status_code == 401, answer.status_code
                else:
                    assert (await http.get(url + "/ping")).status_code == 200
                count += 1
        return count

    async def all_of_them() -> int:
        deadline = time.monotonic() + seconds
        return sum(await asyncio.gather(*(one(i, deadline) for i in range(workers))))

    sent.value = asyncio.run(all_of_them())


async def fresh_heard_ms(server: LoopbackServer, key: str) -> float:
    async with connect(server.ws_url, additional_headers={"Authorization": f"Bearer {key}"}) as ws:
        return await heard_ms(ws, SENTENCE, timeout_s=120)


async def beside(
    server: LoopbackServer, key: str, trials: int, wrong_keys: bool, workers: int
) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    sent = ctx.Value("q", 0)
    seconds = 4.0 + trials * 3.0
    flood = ctx.Process(target=_flood, args=(server.url, wrong_keys, workers, seconds, sent))
    flood.start()
    await asyncio.sleep(2.0)  # the flood is at full rate
    onsets = [await fresh_heard_ms(server, key) for _ in range(trials)]
    await asyncio.to_thread(flood.join)
    return {"heard_onset_ms": stats(onsets), "requests_per_s": sent.value / seconds}


async def run(trials: int, workers: int) -> dict[str, Any]:
    engine = KokoroEngine.load()
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        store_url = f"sqlite://{Path(folder) / 'store.sqlite3'}"
        store = open_store(store_url)
        key, _ = await KeyRecords(store).create("tenant")
        await store.close()
        config = ServerConfig(
            port=port, auth_token=TOKEN, store_url=store_url, admission_listeners=4, admission_shed=False
        )
        drainer = build_server(config, engine, log_level="warning")
        server = await asyncio.to_thread(LoopbackServer(drainer.app, port, server=drainer.server).start)
        try:
            await fresh_heard_ms(server, key)  # warm the path once
            alone = [await fresh_heard_ms(server, key) for _ in range(trials)]
            ping = await beside(server, key, trials, False, workers)
            wrong = await beside(server, key, trials, True, workers)
        finally:
            await asyncio.to_thread(server.stop)
    return {
        "trials": trials,
        "flood_workers": workers,
        "heard_onset_ms": {
            "alone": stats(alone),
            "beside_a_ping_flood": ping["heard_onset_ms"],
            "beside_a_wrong_key_flood": wrong["heard_onset_ms"],
        },
        "flood_requests_per_s": {"ping": ping["requests_per_s"], "wrong_keys": wrong["requests_per_s"]},
        "ratio_p50": wrong["heard_onset_ms"]["p50"] / ping["heard_onset_ms"]["p50"],
    }


CASES = {
    "alone": "alone",
    "beside_a_ping_flood": "beside a flood of /ping",
    "beside_a_wrong_key_flood": "beside a flood of wrong keys",
}


def report(d: dict[str, Any]) -> str:
    rows = [[CASES[k], md_value(v["p50"]), md_value(v["max"])] for k, v in d["heard_onset_ms"].items()]
    rates = d["flood_requests_per_s"]
    return (
        md_table(["a good key's sentence on a fresh session, heard onset (ms)", "p50", "max"], rows)
        + f"\n\nThe floods: {rates['ping']:.0f} `/ping` per s and {rates['wrong_keys']:.0f} speech requests with "
        f"guessed keys per s ({d['flood_workers']} connections, another process). Beside wrong keys / beside "
        f"`/ping`, p50: {d['ratio_p50']:.2f}x.\n"
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--flood-workers", type=int, default=16)
    args = parser.parse_args(argv)
    result = asyncio.run(run(args.trials, args.flood_workers))
    rates = result["flood_requests_per_s"]
    rows = [
        {"case": k.replace("_", " "), **{m: round(v[m]) for m in ("p50", "p95", "max")}}
        for k, v in result["heard_onset_ms"].items()
    ]
    print(
        table(
            rows,
            [
                ("case", "a good key's sentence, heard onset (ms)"),
                ("p50", "p50"),
                ("p95", "p95"),
                ("max", "max"),
            ],
        )
    )
    print(
        f"flood: {rates['ping']:.0f} /ping per s, {rates['wrong_keys']:.0f} wrong-key requests per s; "
        f"wrong keys / ping flood, heard onset p50: {result['ratio_p50']:.2f}x"
    )
    print(f"wrote {write_result('key_flood', result)}")
    return result


if __name__ == "__main__":
    main()
