"""Another caller's speech while a hostile one's text is being planned: heard onset of an ordinary sentence
on a fresh session, alone and while the attacks of docs/reliability.md's third review run beside it.

The attacks: a 10,000-character hyphen chain on a session (English G2P), and its Latin twin through
``/v1/audio/speech`` with a Mandarin voice (Latin runs go to the English G2P). Before the G2P was bounded,
callers arriving a second later waited 23 s for first audio (0.2 s alone). Also the decoding speed
admission counts listeners with, before and during (planning must not read as slow decoding).

    python -m streamvoice.bench.hostile [--trials 5]      (writes results/hostile.json)
"""

from __future__ import annotations

import argparse
import asyncio
import json
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

SENTENCE = "Your table for four is booked for seven tonight."
# The same two callers with ordinary text: what a third caller's first audio costs beside two listeners
# being spoken to, the fair "normal time" to hold the attack's figures against.
ORDINARY = "Let me read you the whole itinerary, one stop at a time, with the times and the platforms. " * 12
ORDINARY_ZH = "我们明天早上九点出发，先去博物馆，然后在湖边吃午饭，下午再去老城区走一走。" * 12
CHAIN = "-".join(str(i % 10) for i in range(5_000))[:9_999]
LATIN_CHAIN = "-".join("ab" for _ in range(3_300))[:9_999]


async def fresh_heard_ms(url: str) -> float:
    """The ordinary sentence on a fresh session: ms until it is heard."""
    async with connect(url) as ws:
        return await heard_ms(ws, SENTENCE, timeout_s=120)


async def beside(server: LoopbackServer, trials: int, ws_text: str, http_text: str) -> list[float]:
    """A third caller's heard onsets while one session and one OpenAI request (a Mandarin voice) speak."""
    async with connect(server.ws_url) as first, httpx.AsyncClient(timeout=120) as http:
        await first.send(json.dumps({"text": ws_text}))
        body = {"input": http_text, "voice": "zf_xiaobei", "response_format": "pcm"}
        second = asyncio.ensure_future(http.post(server.url + "/v1/audio/speech", json=body))
        await asyncio.sleep(1.0)  # both are being planned and spoken
        onsets = [await fresh_heard_ms(server.ws_url) for _ in range(trials)]
        await first.send(json.dumps({"type": "cancel"}))
        second.cancel()
    return onsets


async def run(trials: int) -> dict[str, Any]:
    engine = KokoroEngine.load()
    port = free_port()
    # Three callers at once admitted on any machine (and fresh sessions for each reading: a session that has
    # just spoken has audio still to play): what is measured is planning, not admission.
    # Four listeners admitted and none shed: the figures are about planning, not admission. Since the
    # slowdown watch (#41) this benchmark's three listeners on a machine that feeds two were shed, and the
    # next caller refused ``server_busy``: the run failed.
    config = ServerConfig(port=port, admission_listeners=4, admission_shed=False)
    drainer = build_server(config, engine, log_level="warning")
    server = await asyncio.to_thread(LoopbackServer(drainer.app, port, server=drainer.server).start)
    load = drainer.app.state.service.load
    try:
        await fresh_heard_ms(server.ws_url)  # warm the path once
        alone = [await fresh_heard_ms(server.ws_url) for _ in range(trials)]
        rtf_before = load.decode_speed.rtf
        ordinary = await beside(server, trials, ORDINARY, ORDINARY_ZH)  # loads the Mandarin phonemiser too
        await asyncio.sleep(2.0)  # their slots go (idle release)
        during = await beside(server, trials, CHAIN, LATIN_CHAIN)
        rtf_during = load.decode_speed.rtf
    finally:
        await asyncio.to_thread(server.stop)
    a, o, d = stats(alone), stats(ordinary), stats(during)
    return {
        "trials": trials,
        "heard_onset_ms": {"alone": a, "beside_two_ordinary_answers": o, "beside_the_attacks": d},
        "ratio_p50": d["p50"] / o["p50"],
        "ratio_max": d["max"] / o["max"],
        # The decoding speed admission counts listeners with: planning must not read as slow decoding.
        "decode_rtf": {"before": rtf_before, "during_attack": rtf_during},
        "before_the_fix": {"first_audio_ms_during_attack": 23_000, "capacity": "3 -> 1 within ~10 s"},
    }


NAMES = {
    "alone": "alone",
    "beside_two_ordinary_answers": "beside two ordinary answers",
    "beside_the_attacks": "beside the two attacks",
}


def report(d: dict[str, Any]) -> str:
    rows = [[NAMES[k], md_value(v["p50"]), md_value(v["max"])] for k, v in d["heard_onset_ms"].items()]
    rtf = d["decode_rtf"]
    return (
        md_table(["another caller's sentence, heard onset (ms)", "p50", "max"], rows)
        + f"\n\nBeside the attacks / beside ordinary answers: p50 {d['ratio_p50']:.2f}x, max "
        f"{d['ratio_max']:.2f}x. The decoding speed admission counts with: "
        f"{rtf['before']:.3f} s of work per second of audio before, {rtf['during_attack']:.3f} during the attacks. Before the G2P was bounded, callers a second behind such an attack waited 23 s "
        "for first audio and the capacity fell from 3 to 1.\n"
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
    rtf = result["decode_rtf"]
    print(f"beside the attacks / beside ordinary answers: p50 {result['ratio_p50']:.2f}x, "
          f"max {result['ratio_max']:.2f}x; "
          f"decoding {rtf['before']:.3f} -> {rtf['during_attack']:.3f} s per audio s")  # fmt: skip
    print(f"wrote {write_result('hostile', result)}")
    return result


if __name__ == "__main__":
    main()
