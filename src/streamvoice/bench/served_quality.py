"""What a listener hears when the server is full: served audio at saturation against the bare engine's.

``bench.quality`` scores the engine's stream against its whole pieces one piece at a time, with the machine
to itself. A served listener's windows are also cut short whenever other listeners need the model (a call
cannot be interrupted, so ``WindowPlan.iter_windows`` caps each by the others' deadlines): at saturation a
piece is decoded in more, smaller windows, so more seams. This benchmark hears the difference.

A server as shipped (deadline scheduling, the admission queue on its measured capacity) on loopback takes K
listeners at once, each sending ``bench.quality``'s six held-out sentences in each of its six voices, as 36
messages at once (each listener starting at another voice). Every message's audio is scored
against the bare engine's audio of the same sentence and voice, both its whole piece and its own stream
(``bench.quality``'s warm stream, no server): PESQ (wide band) against the whole piece, DNSMOS overall of
all three, and per sentence how far the served audio falls below the bare engine's stream. K = 1 (one
listener alone), the capacity the server measured, and twice it (the queue fills and waits out; every
admitted listener's windows are capped by the others' deadlines), each on a fresh server.

Run: ``python -m streamvoice.bench.served_quality [--listeners 1,capacity,2xcapacity]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
from numpy.typing import NDArray

from streamvoice.bench.common import table, write_result
from streamvoice.bench.loopback import LoopbackServer
from streamvoice.bench.quality import SENTENCES, VOICES, dnsmos, pesq_score
from streamvoice.client import SpeechClient
from streamvoice.client.speech import AudioChunk
from streamvoice.engine import KokoroEngine
from streamvoice.engine.streaming.voice_stats_cache import prepare
from streamvoice.server import ServerConfig, create_app

Audio = NDArray[np.float32]


def capacity(url: str) -> int:
    """The server's measured capacity in real-time listeners (``/metrics``)."""
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        if line.startswith("streamvoice_capacity_listeners "):
            return int(float(line.split()[1]))
    raise RuntimeError("the server's /metrics has no streamvoice_capacity_listeners")


def listener_counts(spec: str, measured: int) -> list[int]:
    """``--listeners`` entries: a number, ``capacity`` or ``Nxcapacity`` (of the server's measured capacity)."""
    counts = []
    for entry in (e.strip() for e in spec.split(",") if e.strip()):
        if entry == "capacity":
            counts.append(measured)
        elif entry.endswith("xcapacity"):
            counts.append(max(1, round(float(entry.removesuffix("xcapacity")) * measured)))
        else:
            counts.append(int(entry))
    return counts


Pair = tuple[str, str]  # (voice, sentence)


ALL_PAIRS: list[Pair] = [(voice, text) for voice in VOICES for text in SENTENCES]


def listener_pairs(i: int) -> list[Pair]:
    """Listener ``i``'s messages: every (voice, sentence), started a voice further on than listener i - 1's,
    so that listeners at once say different things."""
    at = i * len(SENTENCES) % len(ALL_PAIRS)
    return ALL_PAIRS[at:] + ALL_PAIRS[:at]


async def listen(url: str, pairs: list[Pair]) -> dict[Pair, Audio | str]:
    """One listener: every message sent at once, each message's audio (or its error code)."""
    async with await SpeechClient.connect(url) as client:
        ids = {
            await client.synthesize(text, voice=voice, format="pcm"): (voice, text) for voice, text in pairs
        }
        audio: dict[str, bytearray] = {i: bytearray() for i in ids}
        out: dict[Pair, Audio | str] = {}
        async for event in client.events():
            if isinstance(event, AudioChunk):
                if event.id in audio:
                    audio[event.id] += event.data
                continue
            msg = event.payload.get("id")
            if msg not in ids:
                continue
            if event.type == "synthesis_complete":
                pcm = np.frombuffer(bytes(audio[msg]), dtype="<i2")
                out[ids[msg]] = (pcm / np.float32(32767)).astype(np.float32)
            elif event.type == "error":
                out[ids[msg]] = str(event.payload.get("code", "error"))
            if len(out) == len(ids):
                return out
    raise RuntimeError("the session ended before every message was answered")


@dataclass(frozen=True)
class Bare:
    """The bare engine's audio of one (voice, sentence): whole, streamed, and their scores."""

    whole: Audio
    pesq: float  # its stream against its whole piece
    dnsmos_whole: float
    dnsmos_streamed: float


def bare(engine: KokoroEngine, voice: str, text: str) -> Bare:
    spec = engine.parse_voice(voice)
    pieces = engine.planner.plan(text, engine.resolve_lang(spec, None))  # as the server reads it
    whole = np.concatenate([engine.synthesize_piece(p, spec, 1.0) for p in pieces])
    streamed = np.concatenate([c for p in pieces for c in engine.stream_piece(p, spec, 1.0)])
    return Bare(whole, pesq_score(whole, streamed), dnsmos(whole), dnsmos(streamed))


def run(engine: KokoroEngine, k: int, bares: dict[Pair, Bare]) -> dict[str, Any]:
    """K listeners on a fresh server; every answered sentence scored against the bare engine's."""
    with LoopbackServer(create_app(ServerConfig(), engine=engine)) as server:

        async def everyone() -> list[dict[Pair, Audio | str]]:
            return list(await asyncio.gather(*(listen(server.url, listener_pairs(i)) for i in range(k))))

        heard = asyncio.run(everyone())
    scores: list[dict[str, Any]] = []
    refused = 0
    for answers in heard:
        for (voice, text), audio in answers.items():
            if isinstance(audio, str):
                refused += 1
                continue
            b = bares[voice, text]
            scores.append({
                "voice": voice, "text": text, "pesq": pesq_score(b.whole, audio), "pesq_bare": b.pesq,
                "dnsmos_served": dnsmos(audio), "dnsmos_bare": b.dnsmos_streamed, "dnsmos_whole": b.dnsmos_whole,
            })  # fmt: skip
    if not scores:
        return {"listeners": k, "sentences": 0, "refused": refused, "scores": []}
    below = [s["dnsmos_bare"] - s["dnsmos_served"] for s in scores]
    row: dict[str, Any] = {"listeners": k, "sentences": len(scores), "refused": refused}
    for key in ("pesq", "pesq_bare", "dnsmos_whole", "dnsmos_bare", "dnsmos_served"):
        row[key] = statistics.fmean(s[key] for s in scores)
    row["pesq_min"] = min(s["pesq"] for s in scores)
    row["below_bare"] = statistics.fmean(below)
    row["below_bare_max"] = max(below)
    row["below_whole"] = row["dnsmos_whole"] - row["dnsmos_served"]
    return {**row, "scores": scores}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--listeners", default="1,capacity,2xcapacity", help="numbers, 'capacity' or 'Nxcapacity'"
    )
    args = parser.parse_args(argv)
    engine = KokoroEngine.load()
    prepare(engine)
    bares = {pair: bare(engine, *pair) for pair in ALL_PAIRS}
    with LoopbackServer(create_app(ServerConfig(), engine=engine)) as server:
        measured = capacity(server.url)
    rows = []
    for k in listener_counts(args.listeners, measured):
        rows.append(run(engine, k, bares))
        print({key: v for key, v in rows[-1].items() if key != "scores"}, flush=True)
    print(
        f"\nServed at K listeners against the bare engine (its whole pieces and its stream; PESQ against whole) (capacity measured: {measured})\n"
    )
    print(
        table(
            rows,
            [
                ("listeners", "listeners"),
                ("sentences", "sentences"),
                ("refused", "refused"),
                ("pesq", "PESQ served"),
                ("pesq_min", "lowest"),
                ("pesq_bare", "PESQ bare stream"),
                ("dnsmos_whole", "DNSMOS whole"),
                ("dnsmos_bare", "bare stream"),
                ("dnsmos_served", "served"),
                ("below_bare", "served below bare"),
                ("below_bare_max", "most, one sentence"),
                ("below_whole", "served below whole"),
            ],
        )
    )
    result = {"capacity": measured, "voices": VOICES, "sentences": SENTENCES, "rows": rows}
    print(f"\nwrote {write_result('served_quality', result)}")
    return result


if __name__ == "__main__":
    main()
