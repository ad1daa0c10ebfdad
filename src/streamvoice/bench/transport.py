"""Transport isolation (the AWS reference sample's experiment) and the server's overhead over the bare engine.

Time to first audio for the AWS reference sample's four-sentence block sent as one message, as its first sentence only,
and as our fast first piece, over a real WebSocket session on loopback; beside them the bare engine:
the reference design (one whole-piece model call on the whole block, nothing leaves before it ends) and the
engine's own first-audio time for each text, which gives the server's overhead ratio.

Run: ``python -m streamvoice.bench.transport [--trials 20]``
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from streamvoice.bench.common import FOUR_SENTENCES, heard_onset_s, stats, table, write_result
from streamvoice.bench.loopback import LoopbackServer
from streamvoice.bench.tables import md_table, md_value
from streamvoice.client import AudioChunk, ControlEvent, SpeechClient
from streamvoice.engine import KokoroEngine, Piece
from streamvoice.protocol import DEFAULT_VOICE
from streamvoice.server import ServerConfig, create_app
from streamvoice.text.boundaries import sentence_cuts
from streamvoice.text.chunker import FAST_FIRST, chunk_text

REFERENCE_PUBLISHED: dict[str, float] = {
    "whole_block_ms": 329.3,
    "first_sentence_ms": 156.7,
    "reduction": 0.524,
}
REFERENCE_HARDWARE = "ml.g5.xlarge (A10G GPU), 5 trials"


def texts() -> dict[str, str]:
    cuts, _ = sentence_cuts(FOUR_SENTENCES, final=True)
    first_sentence = FOUR_SENTENCES[: cuts[0]].strip()
    return {
        "whole block": FOUR_SENTENCES,
        "first sentence": first_sentence,
        "fast first piece": chunk_text(FOUR_SENTENCES, FAST_FIRST)[0],
    }


def bare_first_audio_ms(engine: KokoroEngine, text: str) -> float:
    """The engine alone, same path as the server: plan, then the first decoded window."""
    started = time.perf_counter()
    spec = engine.parse_voice(DEFAULT_VOICE)
    piece = engine.planner.plan(text, "en-us")[0]
    for _ in engine.stream_piece(piece, spec, 1.0):
        return (time.perf_counter() - started) * 1000
    raise RuntimeError("no audio")


def reference_design_ms(engine: KokoroEngine, text: str) -> float:
    """One whole-piece model call on the whole text; the first byte can only leave after it."""
    started = time.perf_counter()
    phonemes = engine.planner.phonemizer.phonemize(text, "en-us")
    tokens = engine.planner.phonemizer.tokenize(phonemes)
    engine.synthesize_piece(
        Piece.of_tokens(tokens), engine.parse_voice(DEFAULT_VOICE), 1.0, trim=False, learn=False
    )
    return (time.perf_counter() - started) * 1000


async def session_first_audio_ms(client: SpeechClient, text: str) -> tuple[float, float]:
    """First byte and heard onset (first byte plus the silence before speech, or its arrival), in ms."""
    started = time.perf_counter()
    await client.synthesize(text)
    arrivals: list[tuple[float, int]] = []
    pcm = bytearray()
    async for event in client.events():
        if isinstance(event, AudioChunk):
            arrivals.append((event.received_at, len(event.data)))
            pcm += event.data
        if isinstance(event, ControlEvent) and event.type in ("synthesis_complete", "error"):
            if event.type == "error":
                raise RuntimeError(event.payload)
            break
    heard = heard_onset_s(started, arrivals, bytes(pcm))
    assert arrivals and heard is not None
    return (arrivals[0][0] - started) * 1000, heard * 1000


async def run_trials(url: str, engine: KokoroEngine, cases: dict[str, str], trials: int) -> dict[str, Any]:
    """Every measurement interleaved in one loop, so drift on the machine hits all of them alike."""
    out: dict[str, Any] = {
        "session": {name: [] for name in cases},
        "heard": {name: [] for name in cases},
        "bare": {name: [] for name in cases},
        "reference_design_block": [],
        "reference_design_sentence": [],
    }
    async with await SpeechClient.connect(url) as client:
        await session_first_audio_ms(client, "Warm up.")
    for _ in range(3):
        bare_first_audio_ms(engine, cases["first sentence"])
    for _ in range(trials):
        for name, text in cases.items():
            out["bare"][name].append(bare_first_audio_ms(engine, text))
            # A fresh session per trial: a session that already streamed seconds of audio has a listener
            # with audio buffered, and the server rightly trades its first-audio latency for throughput.
            async with await SpeechClient.connect(url) as client:
                first, heard = await session_first_audio_ms(client, text)
            out["session"][name].append(first)
            out["heard"][name].append(heard)
        out["reference_design_block"].append(reference_design_ms(engine, cases["whole block"]))
        out["reference_design_sentence"].append(reference_design_ms(engine, cases["first sentence"]))
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=20)
    args = parser.parse_args(argv)

    engine = KokoroEngine.load()
    cases = texts()
    with LoopbackServer(create_app(ServerConfig(), engine=engine)) as server:
        raw = asyncio.run(run_trials(server.url, engine, cases, args.trials))
    session, bare = raw["session"], raw["bare"]
    reference_design, reference_sentence = raw["reference_design_block"], raw["reference_design_sentence"]

    baseline = stats(reference_design)["mean"]
    rows = [
        {
            "case": "reference design, whole block (bare engine, whole piece)",
            **stats(reference_design),
            "of_baseline": 1.0,
        },
        {
            "case": "reference design, first sentence (bare engine, whole piece)",
            **stats(reference_sentence),
            "of_baseline": stats(reference_sentence)["mean"] / baseline,
        },
    ]
    for name in cases:
        s = stats(session[name])
        heard = stats(raw["heard"][name])
        rows.append(
            {
                "case": f"streamvoice session: {name}",
                **s,
                "of_baseline": s["mean"] / baseline,
                "overhead": s["mean"] / stats(bare[name])["mean"],
                "heard_mean": heard["mean"],
                "heard_of_baseline": heard["mean"] / baseline,
            }
        )
        rows.append(
            {
                "case": f"bare engine: {name}",
                **stats(bare[name]),
                "of_baseline": stats(bare[name])["mean"] / baseline,
            }
        )
    print(
        f"Time to first audio, ms ({args.trials} trials each, interleaved; texts: {len(FOUR_SENTENCES)} chars)\n"
    )
    print(
        table(
            rows,
            [
                ("case", "case"),
                ("mean", "mean"),
                ("p50", "p50"),
                ("p95", "p95"),
                ("of_baseline", "÷ reference design"),
                ("overhead", "÷ bare engine"),
                ("heard_mean", "heard onset mean"),
                ("heard_of_baseline", "heard ÷ reference design"),
            ],
        )
    )
    print(
        f"\nAWS reference sample (published, their GPU): whole block {REFERENCE_PUBLISHED['whole_block_ms']} ms -> first sentence {REFERENCE_PUBLISHED['first_sentence_ms']} ms "
        f"({REFERENCE_PUBLISHED['first_sentence_ms'] / REFERENCE_PUBLISHED['whole_block_ms']:.1%} of the block)"
    )
    result = {
        "trials": args.trials,
        "texts": cases,
        "reference": {**REFERENCE_PUBLISHED, "hardware": REFERENCE_HARDWARE},
        "rows": rows,
        "raw": raw,
    }
    path = write_result("transport", result)
    print(f"\nwrote {path}")
    return result


def report(d: dict[str, Any]) -> str:
    rows = [
        [
            r["case"],
            md_value(r["mean"], 1),
            md_value(r["p50"], 1),
            md_value(r["p95"], 1),
            f"{r['of_baseline']:.1%}",
            md_value(r.get("overhead"), 2),
            md_value(r.get("heard_mean"), 1),
        ]
        for r in d["rows"]
    ]
    return (
        f"Texts: the AWS reference sample's shape, a {len(d['texts']['whole block'])}-character four-sentence block; "
        f'first sentence: "{d["texts"]["first sentence"]}"; our fast first piece: "{d["texts"]["fast first piece"]}". '
        f"{d['trials']} trials each, all measurements interleaved in one loop.\n\n"
        + md_table(
            [
                "case",
                "first byte mean ms",
                "p50 ms",
                "p95 ms",
                "of the reference design",
                "session / bare engine",
                "heard onset mean ms",
            ],
            rows,
        )
        + f"\n\nAWS reference sample (published, {d['reference']['hardware']}): whole block {d['reference']['whole_block_ms']} ms, first sentence "
        f"{d['reference']['first_sentence_ms']} ms "
        f"({d['reference']['first_sentence_ms'] / d['reference']['whole_block_ms']:.1%} of the block)."
    )


if __name__ == "__main__":
    main()
