"""End to end: bidi vs batch vs bidi with a fast first piece, through the real agent pipeline and a real
speech server, with the local model and with the scripted source at 20, 50 and 100 tokens/s.

Time to first audio is each mode's first ``audio_chunk`` against ``agent_start`` (the AWS reference sample's measure).

Run: ``python -m streamvoice.bench.e2e [--runs 3] [--no-local]``
"""

from __future__ import annotations

import argparse
import asyncio
import base64
from dataclasses import replace
from typing import Any

from streamvoice.agent.llm import ScriptedTextSource, TextSource
from streamvoice.agent.local_llm import LlamaCppSource
from streamvoice.agent.pipeline import SpeechPipeline, Turn, TurnOptions
from streamvoice.bench.common import CLIENT_SCHEDULE, heard_onset_s, stats, table, write_result
from streamvoice.bench.loopback import LoopbackServer
from streamvoice.bench.tables import md_table, md_value
from streamvoice.client import SpeechClient
from streamvoice.client.quiet import QUIET, with_quiet
from streamvoice.engine import KokoroEngine
from streamvoice.server import ServerConfig, create_app
from streamvoice.text.chunker import ChunkPolicy, IncrementalSentenceChunker

# A typical spoken answer: six sentences, ~110 words.
ANSWER = (
    "The sky looks blue because of the way sunlight interacts with the air. Sunlight contains every colour, "
    "and each colour travels as a wave of a different length. When the light hits the tiny molecules of "
    "nitrogen and oxygen, the short blue waves are scattered in every direction much more than the long red "
    "ones. So wherever you look, blue light reaches your eyes from all over the sky. At sunrise and sunset "
    "the light travels through far more air, and most of the blue is scattered away before it arrives. "
    "That is why the evening sky glows orange and red."
)
PROMPT = "Why is the sky blue?"


def agent_cuts(policy: ChunkPolicy) -> type[Turn]:
    """A turn whose agent cuts the pieces itself with ``policy``, one message each: the schedules the server's
    own cut (one streamed message, the agent as shipped) is compared with, through the same pipeline."""

    class AgentCuts(Turn):
        async def produce(self, client: SpeechClient, produced: asyncio.Event) -> None:
            chunker = IncrementalSentenceChunker(policy)
            async for delta in with_quiet(self.deltas()):
                if delta is QUIET:  # the model paused after a finished sentence: speak it now
                    for piece in chunker.quiet():
                        await self.send(client, piece)
                    continue
                assert isinstance(delta, str)
                self.took(delta)
                for piece in chunker.feed(delta):
                    await self.send(client, piece)
            for piece in chunker.flush():
                await self.send(client, piece)
            produced.set()

    return AgentCuts


MODES: dict[str, tuple[TurnOptions, type[Turn]]] = {
    "batch": (TurnOptions(mode="batch"), Turn),
    "bidi (sentences)": (TurnOptions(mode="bidi"), agent_cuts(replace(CLIENT_SCHEDULE, fast_first=False))),
    "bidi + fast first piece (agent cuts)": (TurnOptions(mode="bidi"), agent_cuts(CLIENT_SCHEDULE)),
    "bidi + fast first piece": (TurnOptions(mode="bidi"), Turn),  # the agent as shipped: the server cuts
}


async def one_turn(pipeline: SpeechPipeline, options: TurnOptions) -> dict[str, Any]:
    out: dict[str, Any] = {"first_text_ms": None, "first_audio_ms": None, "total_ms": None, "error": None}
    pcm = bytearray()
    arrivals: list[tuple[float, int]] = []
    async for event in pipeline.run(PROMPT, options):
        if event["type"] == "text_delta" and out["first_text_ms"] is None:
            out["first_text_ms"] = event["t_ms"]
        elif event["type"] == "audio_chunk":
            if out["first_audio_ms"] is None:
                out["first_audio_ms"] = event["t_ms"]
            data = event["data"] if isinstance(event["data"], bytes) else base64.b64decode(event["data"])
            pcm += data
            arrivals.append((event["t_ms"] / 1000, len(data)))
        elif event["type"] == "agent_end":
            out["total_ms"] = event["t_ms"]
        elif event["type"] == "error":
            out["error"] = event["code"]
    heard = heard_onset_s(0.0, arrivals, bytes(pcm))
    out["heard_ms"] = None if heard is None else heard * 1000
    if out["heard_ms"] is not None and out["first_text_ms"] is not None:
        out["text_to_heard_ms"] = out["heard_ms"] - out["first_text_ms"]
    return out


async def run_source(url: str, source: TextSource, runs: int) -> dict[str, list[dict[str, Any]]]:
    async def connect() -> SpeechClient:
        return await SpeechClient.connect(url)

    pipelines = {mode: SpeechPipeline(source, connect, turn) for mode, (_, turn) in MODES.items()}
    await one_turn(pipelines["bidi + fast first piece"], MODES["bidi + fast first piece"][0])  # warm-up
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    names = list(MODES)
    for i in range(runs):
        order = names if i % 2 == 0 else names[::-1]
        for mode in order:
            results[mode].append(await one_turn(pipelines[mode], MODES[mode][0]))
    return results


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-local", action="store_true", help="skip the local llama.cpp model")
    args = parser.parse_args(argv)

    sources: dict[str, TextSource] = {}
    if not args.no_local:
        local = LlamaCppSource()
        local.start()
        sources["local Gemma 3 270M"] = local
    for rate in (20, 50, 100):
        sources[f"scripted {rate} tok/s"] = ScriptedTextSource(ANSWER, ttft_s=0.2, tokens_per_s=rate)

    engine = KokoroEngine.load()
    rows: list[dict[str, Any]] = []
    raw: dict[str, Any] = {}
    with LoopbackServer(create_app(ServerConfig(), engine=engine)) as server:
        for name, source in sources.items():
            results = asyncio.run(run_source(server.url, source, args.runs))
            raw[name] = results
            batch = stats([r["first_audio_ms"] for r in results["batch"] if r["first_audio_ms"] is not None])
            batch_heard = stats([r["heard_ms"] for r in results["batch"] if r.get("heard_ms") is not None])
            for mode, runs in results.items():
                first = stats([r["first_audio_ms"] for r in runs if r["first_audio_ms"] is not None])
                heard = stats([r["heard_ms"] for r in runs if r.get("heard_ms") is not None])
                ours = stats([r["text_to_heard_ms"] for r in runs if r.get("text_to_heard_ms") is not None])
                rows.append(
                    {
                        "source": name,
                        "mode": mode,
                        "first_audio_p50": first.get("p50"),
                        "first_audio_mean": first.get("mean"),
                        "heard_p50": heard.get("p50"),
                        "text_to_heard_p50": ours.get("p50"),
                        "batch_over_mode_heard": batch_heard["p50"] / heard["p50"]
                        if heard and batch_heard
                        else None,
                        "total_p50": stats([r["total_ms"] for r in runs if r["total_ms"]]).get("p50"),
                        "batch_over_mode": batch["p50"] / first["p50"] if first and batch else None,
                        "errors": sum(1 for r in runs if r["error"]),
                    }
                )
    print(f"End to end, time to first audio (ms), {args.runs} runs per mode, alternating order\n")
    print(
        table(
            rows,
            [
                ("source", "source"),
                ("mode", "mode"),
                ("first_audio_p50", "first audio p50"),
                ("first_audio_mean", "mean"),
                ("heard_p50", "heard onset p50"),
                ("text_to_heard_p50", "first text to heard p50"),
                ("total_p50", "total p50"),
                ("batch_over_mode", "batch ÷ mode"),
                ("batch_over_mode_heard", "batch ÷ mode, heard"),
                ("errors", "errors"),
            ],
        )
    )
    print("\nAWS reference sample (published): bidi 2.4x faster than batch (local), 3.5x (deployed)")
    path = write_result("e2e", {"runs": args.runs, "rows": rows, "raw": raw})
    print(f"wrote {path}")
    return {"rows": rows}


def report(d: dict[str, Any]) -> str:
    rows = [
        [
            r["source"],
            r["mode"],
            md_value(r["first_audio_p50"]),
            md_value(r.get("heard_p50")),
            md_value(r.get("text_to_heard_p50")),
            md_value(r["total_p50"]),
            md_value(r["batch_over_mode"], 2) + "x",
            md_value(r.get("batch_over_mode_heard"), 2) + "x",
            str(r["errors"]),
        ]
        for r in d["rows"]
    ]
    return (
        f"{d['runs']} runs per mode, alternating order. Heard onset: when a player starting at the first byte "
        "plays the first audible sample; from the LLM's first text, the part of the latency that is ours.\n\n"
        + md_table(
            [
                "LLM source",
                "mode",
                "first audio p50 ms",
                "heard onset p50 ms",
                "first text to heard p50 ms",
                "total p50 ms",
                "batch / mode",
                "batch / mode, heard",
                "errors",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
