"""8. Every surface, what the listener hears: first byte and heard onset through each integration.

One server (the model, scheduler and Wyoming listener in one process, as ``streamvoice serve
--wyoming-uri`` runs it), the same four-sentence reply through each surface, PCM at 24 kHz. Two groups:

- *whole text*: the reply arrives in one request (session message, ``POST /invocations``, OpenAI raw and
  SSE, Kokoro-FastAPI captioned speech, Wyoming ``synthesize``); timed from the request.
- *streamed text*: the reply arrives as an LLM writes it, word by word at ``--tokens-per-s`` (Wyoming's
  streaming events as Home Assistant sends them, the LiveKit plugin's ``stream()``, the session protocol's
  streamed message, and the ElevenLabs, Cartesia and Deepgram wires as their SDKs send them); timed from the first
  word, with when the last word was sent beside it: speech that starts before the text ends is the point.

Then *barge-in*, per socket wire: the reply is playing (1.5 s of its audio received) when the client stops it
the wire's own way (the session's ``cancel``, Cartesia's ``cancel``, Deepgram's ``Clear`` and ``Interrupt``,
ElevenLabs closing the context and opening the next); from the interrupt sent to the last audio byte of the
stopped answer received, and how much audio that was.

    python -m streamvoice.bench.integrations [--trials N] [--tokens-per-s R]
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from streamvoice.asgi import free_port
from streamvoice.bench.common import FOUR_SENTENCES, heard_onset_s, stats, table, write_result
from streamvoice.bench.tables import md_table, md_value
from streamvoice.bench.wire_barge_ins import BARGE_INS, PLAYED_BEFORE_S
from streamvoice.bench.wire_trials import SURFACES
from streamvoice.engine import KokoroEngine
from streamvoice.engine.streaming.voice_stats_cache import prepare
from streamvoice.server.core.config import ServerConfig
from streamvoice.server.runner import build_server


async def run(trials: int, rate: float) -> list[dict[str, Any]]:
    engine = KokoroEngine.load()
    prepare(engine)
    port, wyoming_port = free_port(), free_port()
    config = ServerConfig(port=port, wyoming_uri=f"tcp://127.0.0.1:{wyoming_port}")
    server = build_server(config, engine, log_level="warning")
    task = asyncio.create_task(server.server.serve())
    url = f"http://127.0.0.1:{port}"
    while not server.server.started:
        await asyncio.sleep(0.05)
    rows = []
    try:
        for group, name, fn in SURFACES:
            await fn(url, wyoming_port, rate)  # warm the path (connections, imports)
            first, heard, audio, text_done = [], [], [], []
            for _ in range(trials):
                started, arrivals, pcm, finished = await fn(url, wyoming_port, rate)
                first.append((arrivals[0][0] - started) * 1000)
                onset = heard_onset_s(started, arrivals, pcm)
                heard.append((onset or float("nan")) * 1000)
                audio.append(len(pcm) / 2 / 24_000)
                if finished is not None:
                    text_done.append((finished - started) * 1000)
            rows.append(
                {
                    "group": group,
                    "surface": name,
                    "first_byte_ms": stats(first)["p50"],
                    "heard_ms": stats(heard)["p50"],
                    "heard_p95_ms": stats(heard)["p95"],
                    "text_done_ms": stats(text_done)["p50"] if text_done else None,
                    "audio_s": stats(audio)["p50"],
                    "trials": trials,
                }
            )
            print(f"  {name}: heard {rows[-1]['heard_ms']:.0f} ms", flush=True)
        for name, barge in BARGE_INS:
            await barge(url)  # warm
            stops, tails, acks = [], [], []
            for _ in range(trials):
                stop_ms, tail_ms, ack_ms = await barge(url)
                stops.append(stop_ms)
                tails.append(tail_ms)
                if ack_ms is not None:
                    acks.append(ack_ms)
            rows.append(
                {
                    "group": "barge-in",
                    "surface": name,
                    "last_audio_ms": stats(stops)["p50"],
                    "last_audio_p95_ms": stats(stops)["p95"],
                    "audio_after_ms": stats(tails)["p50"],
                    "acknowledged_ms": stats(acks)["p50"] if acks else None,
                    "trials": trials,
                }
            )
            print(f"  {name}: last audio {rows[-1]['last_audio_ms']:.0f} ms after the interrupt", flush=True)
    finally:
        server.server.should_exit = True
        await task
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--tokens-per-s", type=float, default=20.0, help="pace of the streamed-text surfaces")
    args = parser.parse_args(argv)
    rows = asyncio.run(run(args.trials, args.tokens_per_s))
    speech = [r for r in rows if r["group"] != "barge-in"]
    barge = [r for r in rows if r["group"] == "barge-in"]
    print(
        table(
            speech,
            [
                ("group", "input"),
                ("surface", "surface"),
                ("first_byte_ms", "first byte ms"),
                ("heard_ms", "heard ms (p50)"),
                ("heard_p95_ms", "p95"),
                ("text_done_ms", "last word sent ms"),
                ("audio_s", "audio s"),
            ],
        )
    )
    print(
        table(
            barge,
            [
                ("surface", "barge-in"),
                ("last_audio_ms", "interrupt to last audio byte ms (p50)"),
                ("last_audio_p95_ms", "p95"),
                ("audio_after_ms", "audio after it ms"),
                ("acknowledged_ms", "acknowledged ms"),
            ],
        )
    )
    payload = {"trials": args.trials, "tokens_per_s": args.tokens_per_s, "text": FOUR_SENTENCES, "rows": rows}
    print("wrote", write_result("integrations", payload))
    return payload


def report(d: dict[str, Any]) -> str:
    rows = [
        [
            r["group"],
            r["surface"],
            md_value(r["first_byte_ms"], 0),
            md_value(r["heard_ms"], 0),
            md_value(r["heard_p95_ms"], 0),
            "-" if r["text_done_ms"] is None else md_value(r["text_done_ms"], 0),
            md_value(r["audio_s"], 1),
        ]
        for r in d["rows"]
        if r["group"] != "barge-in"
    ]
    barge = [
        [r["surface"], md_value(r["last_audio_ms"], 0), md_value(r["last_audio_p95_ms"], 0),
         md_value(r["audio_after_ms"], 0),
         "-" if r.get("acknowledged_ms") is None else md_value(r["acknowledged_ms"], 0)]
        for r in d["rows"]
        if r["group"] == "barge-in"
    ]  # fmt: skip
    return (
        f"The four-sentence reply through every surface of one server (Wyoming in the same process), PCM "
        f"24 kHz, {d['trials']} trials each (p50 unless marked). Whole text: timed from the request. Streamed "
        f"text: the reply written word by word at {d['tokens_per_s']:g} words/s, timed from the first word; "
        "speech heard before the last word is sent is the point.\n\n"
        + md_table(
            ["input", "surface", "first byte ms", "heard ms", "heard p95 ms", "last word sent ms", "audio s"],
            rows,
        )
        + (
            f"\n\nBarge-in: the reply playing ({PLAYED_BEFORE_S:g} s of its audio received), the client stops it "
            "the wire's own way; from the interrupt sent to the last audio byte of the stopped answer, and how "
            "much audio came after the interrupt.\n\n"
            + md_table(
                ["wire", "interrupt to last audio ms", "p95 ms", "audio after it ms", "acknowledged ms"],
                barge,
            )
            if barge
            else ""
        )
    )


if __name__ == "__main__":
    main()
