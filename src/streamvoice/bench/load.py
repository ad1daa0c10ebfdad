"""Load and soak on loopback: many concurrent sessions, every message answered exactly once and in order.

``load``: N sessions x M messages at once; checks each answer's order and that the audio bytes received match
what each ``synthesis_complete`` reports; prints p50/p95 time to first audio and the server's peak memory.
``--soak MINUTES``: steady traffic for a bounded time, sampling the process's memory once a second; a flat
line (last minute vs first minute) is the pass. ``--rotate`` makes every message change language, voice
and blend (a new blend each time), which is what filled unbounded caches before they were bounded.

Run: ``python -m streamvoice.bench.load [--sessions 50] [--messages 20]`` or ``--soak 5 [--rotate]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from streamvoice.asgi import free_port
from streamvoice.bench.common import stats, write_result
from streamvoice.bench.loopback import LoopbackServer
from streamvoice.engine import KokoroEngine
from streamvoice.server import ServerConfig
from streamvoice.server.runner import build_server

TEXTS = ["Yes.", "Okay, done.", "Thanks!", "Sure thing.", "One moment.", "Got it."]
# One voice per language Kokoro speaks, so rotating through them rotates the phonemiser's language too.
VOICE_PER_LANG = [
    ("af_heart", "en-us"), ("bf_emma", "en-gb"), ("ef_dora", "es"), ("ff_siwis", "fr-fr"), ("hf_alpha", "hi"),
    ("if_sara", "it"), ("jf_alpha", "ja"), ("pf_dora", "pt-br"), ("zf_xiaobei", "cmn"),
]  # fmt: skip


def rotated_options(n: int) -> dict[str, Any]:
    """Message ``n``'s voice and language: every language in turn, every other message a fresh blend."""
    voice, lang = VOICE_PER_LANG[n % len(VOICE_PER_LANG)]
    if n % 2:
        other, _ = VOICE_PER_LANG[(n // 2) % len(VOICE_PER_LANG)]
        weight = 0.05 + (n % 89) / 100  # a different blend text nearly every message
        voice = f"{voice}*{weight:.2f}+{other}*{1 - weight:.2f}"
    return {"voice": voice, "lang": lang}


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def session(url: str, sid: int, messages: int, rotate: bool = False, offset: int = 0) -> dict[str, Any]:
    from websockets.asyncio.client import connect

    ws_url = url.replace("http://", "ws://") + "/invocations-bidirectional-stream"
    sent_at: dict[str, float] = {}
    first_audio: dict[str, float] = {}
    audio: dict[str, int] = {}
    answers: list[dict[str, Any]] = []
    async with connect(ws_url, max_size=None) as ws:
        for m in range(messages):
            mid = f"{sid}-{m}"
            sent_at[mid] = time.perf_counter()
            payload = {"type": "synthesize", "text": TEXTS[m % len(TEXTS)], "id": mid}
            if rotate:
                payload.update(rotated_options(offset + sid * messages + m))
            await ws.send(json.dumps(payload))
        current = None
        while len(answers) < messages:
            frame = await ws.recv()
            if isinstance(frame, bytes):
                assert current is not None
                audio[current] = audio.get(current, 0) + len(frame)
                first_audio.setdefault(current, time.perf_counter())
                continue
            event = json.loads(frame)
            if event["type"] == "synthesis_started":
                current = event["id"]
            elif event["type"] in ("synthesis_complete", "error"):
                answers.append(event)
                current = None
        await ws.send(json.dumps({"type": "close"}))
    ids = [a.get("id") for a in answers]
    return {
        "in_order": ids == [f"{sid}-{m}" for m in range(messages)],
        "answered_once": len(set(ids)) == len(ids) == messages,
        "errors": sum(1 for a in answers if a["type"] == "error"),
        "bytes_match": all(
            a.get("bytes") == audio.get(a["id"], 0) for a in answers if a["type"] == "synthesis_complete"
        ),
        "first_audio_ms": [(first_audio[i] - sent_at[i]) * 1000 for i in first_audio],
    }


async def load(
    url: str, sessions: int, messages: int, rotate: bool = False, offset: int = 0
) -> list[dict[str, Any]]:
    return list(await asyncio.gather(*(session(url, s, messages, rotate, offset) for s in range(sessions))))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument(
        "--soak", type=float, default=0.0, help="minutes of steady traffic instead of one burst"
    )
    parser.add_argument(
        "--rotate", action="store_true", help="change language, voice and blend on every message"
    )
    args = parser.parse_args(argv)

    engine = KokoroEngine.load()
    samples: list[tuple[float, float]] = []
    stop = threading.Event()

    def sample_memory() -> None:
        t0 = time.monotonic()
        while not stop.is_set():
            samples.append((time.monotonic() - t0, rss_mb()))
            stop.wait(1.0)

    sampler = threading.Thread(target=sample_memory, daemon=True)
    config = ServerConfig(max_sessions=max(64, args.sessions + 8), max_queued_messages=max(64, args.messages))
    config = replace(config, port=free_port())
    drainer = build_server(config, engine, log_level="warning")  # as ``streamvoice serve`` runs it
    with LoopbackServer(drainer.app, config.port, server=drainer.server) as server:
        sampler.start()
        started = time.monotonic()
        results: list[dict[str, Any]] = []
        rounds = 0
        if args.soak:
            while time.monotonic() - started < args.soak * 60:
                results += asyncio.run(load(server.url, 4, 5, args.rotate, rounds * 20))
                rounds += 1
        else:
            results = asyncio.run(load(server.url, args.sessions, args.messages))
        elapsed = time.monotonic() - started
        stop.set()
        sampler.join()
    first = stats([x for r in results for x in r["first_audio_ms"]])
    total_msgs = sum(len(r["first_audio_ms"]) for r in results)
    summary = {
        "sessions": len(results),
        "messages": total_msgs,
        "all_in_order": all(r["in_order"] for r in results),
        "all_answered_once": all(r["answered_once"] for r in results),
        "bytes_match": all(r["bytes_match"] for r in results),
        "errors": sum(r["errors"] for r in results),
        "first_audio_ms": first,
        "elapsed_s": elapsed,
        "peak_rss_mb": max(m for _, m in samples),
        "rotated": args.rotate,
    }
    if args.soak and len(samples) > 120:
        first_min = [m for t, m in samples if t < 60]
        last_min = [m for t, m in samples if t > samples[-1][0] - 60]
        summary["rss_first_minute_mb"] = sum(first_min) / len(first_min)
        # The first minute includes one-off growth (each language's phonemiser loaded on first use): the
        # second minute against the last one tells whether anything keeps growing.
        second_min = [m for t, m in samples if 60 <= t < 120]
        summary["rss_second_minute_mb"] = sum(second_min) / len(second_min)
        summary["rss_last_minute_mb"] = sum(last_min) / len(last_min)
    for key, value in summary.items():
        print(f"{key:22} {value}")
    name = ("soak-rotate" if args.rotate else "soak") if args.soak else "load"
    path = write_result(name, {"summary": summary, "memory": samples})
    print(f"wrote {path}")
    return summary


if __name__ == "__main__":
    main()
