"""Shared benchmark plumbing: statistics, tables, JSON results, and a real server on loopback."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from streamvoice.audio.levels import heard_onset
from streamvoice.text.chunker import ChunkPolicy

RESULTS_DIR = Path(os.environ.get("STREAMVOICE_RESULTS", "results"))

# The AWS reference sample's four-sentence, ~267-character block (our own text of the same shape).
FOUR_SENTENCES = (
    "Thanks for calling, I can help you with that order today. "
    "Your package left our warehouse on Monday and is now with the courier. "
    "It should arrive by Thursday afternoon, weather permitting. "
    "If it does not arrive by then, just reply and we will send a replacement."
)

# The schedule the agent cut pieces with until the server took the cutting over (issue #32): the benches
# that cut on the client (continuity; e2e's "bidi (sentences)") keep it so their figures stay comparable.
CLIENT_SCHEDULE = ChunkPolicy(
    min_tokens=(12, 30, 60, 100), max_tokens=300, fast_first=True, first_clause_min_tokens=20
)


def stats(values: Sequence[float]) -> dict[str, float]:
    data = sorted(values)
    if not data:
        return {}

    def pct(p: float) -> float:
        k = (len(data) - 1) * p
        lo, hi = int(k), min(int(k) + 1, len(data) - 1)
        return data[lo] + (data[hi] - data[lo]) * (k - lo)

    return {
        "n": len(data),
        "mean": statistics.fmean(data),
        "p50": pct(0.5),
        "p95": pct(0.95),
        "min": data[0],
        "max": data[-1],
    }


def table(rows: list[dict[str, Any]], columns: list[tuple[str, str]]) -> str:
    widths = [max([len(title), *(len(_fmt(r.get(key))) for r in rows)]) for key, title in columns]
    head = "  ".join(title.ljust(w) for (_, title), w in zip(columns, widths, strict=True))
    lines = [head, "  ".join("-" * w for w in widths)]
    for r in rows:
        lines.append(
            "  ".join(_fmt(r.get(key)).ljust(w) for (key, _), w in zip(columns, widths, strict=True))
        )
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3g}"
    return str(value)


def machine() -> dict[str, Any]:
    return {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "processor": _cpu_model(),
        "when": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def commit() -> str:
    """The tree a result was measured on: its commit, ``+changes`` when files differ from it."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=10", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    return head + ("+changes" if changed else "")


def write_result(name: str, payload: dict[str, Any]) -> Path:
    """``results/<name>.json``: the payload with the machine, the date and the commit it was measured on
    (what ``bench.figures`` shows beside each published figure)."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    payload = {"benchmark": name, "machine": machine(), "commit": commit(), **payload}
    path.write_text(json.dumps(payload, indent=2, default=float))
    return path


def heard_onset_s(
    started: float, arrivals: Sequence[tuple[float, int]], pcm: bytes, sample_rate: int = 24_000
) -> float | None:
    """Seconds from ``started`` until a player that starts at the first byte lets the listener hear speech
    (see ``audio.levels.heard_onset``)."""
    onset = heard_onset(arrivals, pcm, sample_rate)
    return None if onset is None else onset - started


async def heard_ms(ws: Any, text: str, msg_id: str | None = None, timeout_s: float = 60.0) -> float:
    """Ms from sending ``text`` on session ``ws`` until a listener whose player starts at the first byte hears
    speech (its answer read to the end)."""
    started = time.monotonic()
    await ws.send(json.dumps({"text": text, "id": msg_id}))
    arrivals: list[tuple[float, int]] = []
    pcm = bytearray()
    while True:
        frame = await asyncio.wait_for(ws.recv(), timeout_s)
        if isinstance(frame, bytes):
            arrivals.append((time.monotonic(), len(frame)))
            pcm += frame
            continue
        event = json.loads(frame)
        if event["type"] in ("synthesis_complete", "error"):
            heard = heard_onset_s(started, arrivals, bytes(pcm))
            assert heard is not None, event
            return heard * 1000
