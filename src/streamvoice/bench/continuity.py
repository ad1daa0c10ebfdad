"""Continuity: does the audio stay ahead of real-time playback for a long answer?

A ten-sentence answer arrives at LLM pace; each piece goes into one session as the chunker completes it.
A simulated real-time player starts at the first audio and plays continuously; starvation is the total
time it waits for audio after it started. Compared: the reference design (sequential session, whole-piece
synthesis: receive, synthesise, send, repeat; its client here sends each piece once the last one's answer
ended, since our server has no sequential mode) and ours (pipelined session, in-piece streaming).

Run: ``python -m streamvoice.bench.continuity [--rate 50] [--plot docs/img/continuity.png]``
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

from streamvoice.agent.llm import ScriptedTextSource
from streamvoice.bench.common import CLIENT_SCHEDULE, heard_onset_s, table, write_result
from streamvoice.bench.loopback import LoopbackServer
from streamvoice.bench.tables import md_table, md_value
from streamvoice.client import AudioChunk, ControlEvent, SpeechClient
from streamvoice.engine import KokoroEngine
from streamvoice.protocol import SAMPLE_RATE
from streamvoice.server import ServerConfig, create_app
from streamvoice.text.chunker import IncrementalSentenceChunker

TEN_SENTENCES = (
    "Bread starts with just four things: flour, water, salt and yeast. "
    "When you mix them, proteins in the flour link up into a stretchy web called gluten. "
    "Kneading lines that web up, so the dough becomes smooth and elastic. "
    "Meanwhile the yeast eats sugars in the flour and breathes out carbon dioxide. "
    "The gas gets trapped in the gluten, and the dough slowly rises. "
    "Most bakers let it rise twice, shaping the loaf in between. "
    "In the oven, the trapped gas expands quickly and the loaf springs up. "
    "The heat then sets the gluten and the starch, fixing the shape in place. "
    "At the same time the surface browns, which gives the crust its colour and flavour. "
    "Let the loaf cool for an hour before slicing, or the inside will be gummy."
)
SR = SAMPLE_RATE
BYTES_PER_S = SR * 2


async def run_answer(url: str, text: str, rate: float, one_at_a_time: bool = False) -> dict[str, Any]:
    """One answer at LLM pace into one session; ``one_at_a_time``: each piece is sent only once the last one's
    answer has ended (the reference design's sequential session, composed here by its client)."""
    source = ScriptedTextSource(text, ttft_s=0.2, tokens_per_s=rate)
    chunker = IncrementalSentenceChunker(CLIENT_SCHEDULE)
    t0 = time.perf_counter()
    pieces: dict[str, dict[str, Any]] = {}
    chunks: list[tuple[float, float]] = []  # (arrival s, audio seconds)
    pcm = bytearray()
    arrivals: list[tuple[float, int]] = []
    told_s: float | None = None
    async with await SpeechClient.connect(url) as client:
        gen_start = 0.0

        async def produce() -> None:
            nonlocal gen_start
            async for delta in source.stream(""):
                for piece in chunker.feed(delta):
                    await send(piece)
            for piece in chunker.flush():
                await send(piece)

        async def send(piece: str) -> None:
            nonlocal gen_start
            if one_at_a_time:
                await answered_all.wait()  # the last piece's answer has ended
                answered_all.clear()
            pid = f"p{len(pieces)}"
            now = time.perf_counter() - t0
            pieces[pid] = {"text": piece, "gen_start": gen_start, "sent": now}
            gen_start = now
            await client.synthesize(piece, id=pid, format="pcm")

        answered_all = asyncio.Event()
        answered_all.set()
        producer = asyncio.create_task(produce())
        answered = 0
        async for event in client.events():
            now = event.received_at - t0
            if isinstance(event, AudioChunk):
                chunks.append((now, len(event.data) / BYTES_PER_S))
                if len(pcm) < 10 * BYTES_PER_S:  # enough for the onset
                    pcm += event.data
                    arrivals.append((now, len(event.data)))
                info = pieces[str(event.id)]
                info.setdefault("first_audio", now)
                continue
            assert isinstance(event, ControlEvent)
            if event.type == "queued" or (
                event.type == "error" and event.payload.get("code") == "server_busy"
            ):
                # admission: when the listener was told it waits, or is refused
                told = now - pieces[str(event.payload.get("id"))]["sent"]
                told_s = told if told_s is None else told_s
            if event.type == "error":
                pieces[str(event.payload.get("id"))]["error"] = event.payload.get("code")
            if event.type in ("synthesis_complete", "error"):
                pieces[str(event.payload.get("id"))]["complete"] = now
                answered += 1
                if answered == len(pieces):
                    answered_all.set()
                if producer.done() and answered == len(pieces):
                    break
        await producer
    return {
        "pieces": list(pieces.values()),
        "chunks": chunks,
        "first_audio_s": chunks[0][0] if chunks else None,
        "heard_s": heard_onset_s(0.0, arrivals, bytes(pcm), SR),
        "told_s": told_s,
    }


def playback(chunks: list[tuple[float, float]]) -> dict[str, Any]:
    """A real-time player: starts at the first audio and never skips; returns starvation and the timeline."""
    if not chunks:
        return {"starvation_s": None, "stalls": 0, "spans": []}
    clock = chunks[0][0]
    starvation = 0.0
    stalls = 0
    spans = []
    for arrival, seconds in chunks:
        if arrival > clock + 1e-3:
            starvation += arrival - clock
            stalls += 1
            clock = arrival
        spans.append((clock, clock + seconds))
        clock += seconds
    return {"starvation_s": starvation, "stalls": stalls, "spans": spans, "end_s": clock}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=float, default=50.0, help="LLM tokens per second")
    parser.add_argument("--plot", type=Path, default=None)
    args = parser.parse_args(argv)

    engine = KokoroEngine.load()
    designs = {  # (server, whether the client sends one piece at a time)
        "reference: sequential, whole piece": (ServerConfig(stream_windows=False), True),
        "pipelined, whole piece": (ServerConfig(stream_windows=False), False),
        "streamvoice: pipelined, windowed": (ServerConfig(), False),
    }
    results: dict[str, Any] = {}
    rows = []
    for name, (config, one_at_a_time) in designs.items():
        with LoopbackServer(create_app(config, engine=engine)) as server:
            asyncio.run(run_answer(server.url, "Warm up. Two sentences.", args.rate))
            run = asyncio.run(run_answer(server.url, TEN_SENTENCES, args.rate, one_at_a_time))
        play = playback(run["chunks"])
        results[name] = {**run, "playback": play}
        rows.append(
            {
                "design": name,
                "pieces": len(run["pieces"]),
                "first_audio_ms": run["first_audio_s"] * 1000,
                "heard_ms": run["heard_s"] * 1000 if run["heard_s"] is not None else None,
                "starvation_ms": play["starvation_s"] * 1000,
                "stalls": play["stalls"],
                "audio_s": sum(s for _, s in run["chunks"]),
            }
        )
    print(f"Ten-sentence answer at {args.rate:g} tokens/s, one session, 2 cores\n")
    print(
        table(
            rows,
            [
                ("design", "design"),
                ("pieces", "pieces"),
                ("first_audio_ms", "first audio ms"),
                ("heard_ms", "heard onset ms"),
                ("starvation_ms", "starvation ms"),
                ("stalls", "stalls"),
                ("audio_s", "audio s"),
            ],
        )
    )
    if args.plot:
        draw(results, args.plot)
    path = write_result("continuity", {"rate": args.rate, "rows": rows, "runs": results})
    print(f"wrote {path}")
    return {"rows": rows}


def draw(results: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(len(results), 1, figsize=(11, 2.6 * len(results)), sharex=True, squeeze=False)
    for ax, (name, run) in zip(axes[:, 0], results.items(), strict=True):
        for i, p in enumerate(run["pieces"]):
            y = len(run["pieces"]) - i
            ax.barh(
                y,
                p["sent"] - p["gen_start"],
                left=p["gen_start"],
                color="#9ecae1",
                height=0.8,
                label="generation" if i == 0 else None,
            )
            if "first_audio" in p:
                ax.barh(
                    y,
                    p["complete"] - p["sent"],
                    left=p["sent"],
                    color="#fdae6b",
                    height=0.5,
                    label="synthesis + sending" if i == 0 else None,
                )
        for j, (a, b) in enumerate(run["playback"]["spans"]):
            ax.barh(0, b - a, left=a, color="#31a354", height=0.8, label="playback" if j == 0 else None)
        ax.set_title(f"{name}: starvation {run['playback']['starvation_s'] * 1000:.0f} ms", fontsize=10)
        ax.set_ylabel("piece (0 = player)")
        ax.legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("seconds since the answer started")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def report(d: dict[str, Any]) -> str:
    rows = [
        [
            r["design"],
            str(r["pieces"]),
            md_value(r["first_audio_ms"]),
            md_value(r.get("heard_ms")),
            md_value(r["starvation_ms"]),
            str(r["stalls"]),
            md_value(r["audio_s"], 1),
        ]
        for r in d["rows"]
    ]
    return (
        f"Ten-sentence answer at {d['rate']:g} tokens/s.\n\n"
        + md_table(
            ["design", "pieces", "first audio ms", "heard onset ms", "starvation ms", "stalls", "audio s"],
            rows,
        )
        + "\n\nTimeline per piece (generation, synthesis and sending, playback):\n\n![timeline](img/continuity.png)"
    )


if __name__ == "__main__":
    main()
