"""Measuring agent turns over HTTP: each mode's first text and first ``audio_chunk`` against ``agent_start``.

A client of the agent's ``POST /invocations`` (Server-Sent Events), used by ``streamvoice demo`` and by
``agent-infra demo`` against a deployed agent.
"""

from __future__ import annotations

import base64
import statistics
from dataclasses import dataclass, field, fields
from typing import Any

import httpx

from streamvoice.audio.levels import heard_onset
from streamvoice.client.sse import iter_sse
from streamvoice.protocol import SAMPLE_RATE

MAX_AUDIO_BYTES = 300 * SAMPLE_RATE * 2  # five minutes of audio kept for the demo's WAVs


@dataclass
class RunResult:
    mode: str
    first_text_ms: float | None
    first_audio_ms: float | None
    total_ms: float | None
    chunks: int
    audio_bytes: int
    error: str | None = None
    heard_ms: float | None = None  # speech audible, for a player that starts at the first byte
    text_to_heard_ms: float | None = None  # from the LLM's first text: the part of the latency that is ours
    # The turn as it happened, for the demo's timeline and WAVs (left out of the JSON summary's runs).
    texts: list[tuple[float, str]] = field(default_factory=list, repr=False)  # (t_ms, LLM text delta)
    pieces: list[tuple[float, str]] = field(default_factory=list, repr=False)  # (t_ms, a speech piece's text)
    arrivals: list[tuple[float, int]] = field(default_factory=list, repr=False)  # (t_ms, audio bytes)
    pcm: bytes = field(default=b"", repr=False)  # all of it, 16-bit mono at SAMPLE_RATE


def run_turn(url: str, prompt: str, mode: str, token: str | None = None, timeout: float = 180.0) -> RunResult:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    result = RunResult(mode, None, None, None, 0, 0)
    with httpx.stream(
        "POST",
        url.rstrip("/") + "/invocations",
        json={"prompt": prompt, "mode": mode},
        headers=headers,
        timeout=timeout,
    ) as resp:
        if resp.status_code != 200:
            resp.read()
            result.error = f"HTTP {resp.status_code}: {resp.text[:200]}"
            return result
        pcm = bytearray()
        arrivals: list[tuple[float, int]] = []
        for sse in iter_sse(resp.iter_raw()):
            event = sse.json()
            kind = event.get("type")
            if kind == "text_delta":
                if result.first_text_ms is None:
                    result.first_text_ms = event["t_ms"]
                result.texts.append((float(event["t_ms"]), str(event.get("text", ""))))
            elif kind == "speech_piece":
                result.pieces.append((float(event["t_ms"]), str(event.get("text", ""))))
            elif kind == "audio_chunk":
                if result.first_audio_ms is None:
                    result.first_audio_ms = event["t_ms"]
                data = base64.b64decode(event["data"])
                result.chunks += 1
                result.audio_bytes += len(data)
                result.arrivals.append((float(event["t_ms"]), len(data)))
                if len(pcm) < MAX_AUDIO_BYTES:
                    pcm += data
                    arrivals.append((float(event["t_ms"]), len(data)))
            elif kind == "agent_end":
                result.total_ms = event["t_ms"]
            elif kind == "error":
                result.error = f"{event.get('code')}: {event.get('message')}"
    result.pcm = bytes(pcm)
    heard = heard_onset([(t / 1000, n) for t, n in arrivals], bytes(pcm), SAMPLE_RATE)
    if heard is not None:
        result.heard_ms = round(heard * 1000, 1)
        if result.first_text_ms is not None:
            result.text_to_heard_ms = round(result.heard_ms - result.first_text_ms, 1)
    return result


def summarise(results: list[RunResult]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in ("bidi", "batch"):
        runs = [r for r in results if r.mode == mode and r.error is None]
        row: dict[str, Any] = {
            "runs": len(runs),
            "errors": sum(1 for r in results if r.mode == mode and r.error),
        }
        for key in ("first_text_ms", "first_audio_ms", "heard_ms", "text_to_heard_ms", "total_ms", "chunks"):
            values = [float(getattr(r, key)) for r in runs if getattr(r, key) is not None]
            row[key] = (
                {"median": statistics.median(values), "min": min(values), "max": max(values)}
                if values
                else None
            )
        out[mode] = row
    b, s = out["bidi"]["first_audio_ms"], out["batch"]["first_audio_ms"]
    out["ratio_batch_over_bidi_first_audio"] = round(s["median"] / b["median"], 2) if b and s else None
    bh, sh = out["bidi"]["heard_ms"], out["batch"]["heard_ms"]
    out["ratio_batch_over_bidi_heard"] = round(sh["median"] / bh["median"], 2) if bh and sh else None
    return out


def format_table(summary: dict[str, Any]) -> str:
    lines = [f"{'mode':6} {'metric':16} {'median':>9} {'min':>9} {'max':>9}"]
    for mode in ("bidi", "batch"):
        row = summary[mode]
        for key, label in (
            ("first_text_ms", "first text ms"),
            ("first_audio_ms", "first audio ms"),
            ("heard_ms", "heard onset ms"),
            ("text_to_heard_ms", "text to heard ms"),
            ("total_ms", "total ms"),
            ("chunks", "audio chunks"),
        ):
            stats = row[key]
            if stats:
                lines.append(
                    f"{mode:6} {label:16} {stats['median']:9.0f} {stats['min']:9.0f} {stats['max']:9.0f}"
                )
        if row["errors"]:
            lines.append(f"{mode:6} errors           {row['errors']:9d}")
    ratio = summary["ratio_batch_over_bidi_first_audio"]
    lines.append(
        f"\nbatch / bidi time to first audio (median): {ratio}x   (AWS reference sample, published: 2.4x local, 3.5x deployed)"
    )
    lines.append(f"batch / bidi heard onset (median): {summary.get('ratio_batch_over_bidi_heard')}x")
    return "\n".join(lines)


def as_row(r: RunResult) -> dict[str, Any]:
    """A run's figures for JSON (the timeline and audio are the demo's files)."""
    return {f.name: getattr(r, f.name) for f in fields(r) if f.repr}


def measure(
    url: str,
    prompt: str,
    runs: int,
    token: str | None = None,
    log: Any = None,
    warm_prompt: str | None = None,
    keep: list[RunResult] | None = None,
) -> dict[str, Any]:
    """Both modes ``runs`` times, alternating which goes first, after one warm-up turn (caches on every
    leg; not counted). ``keep`` receives the runs themselves (timelines and audio)."""
    run_turn(url, warm_prompt or prompt, "bidi", token)
    results: list[RunResult] = []
    for i in range(runs):
        order = ("bidi", "batch") if i % 2 == 0 else ("batch", "bidi")
        for mode in order:
            r = run_turn(url, prompt, mode, token)
            results.append(r)
            if log:
                log(
                    f"run {i + 1}/{runs} {mode:5}: first audio {r.first_audio_ms} ms, heard {r.heard_ms} ms, "
                    f"total {r.total_ms} ms" + (f", error {r.error}" if r.error else "")
                )
    summary = summarise(results)
    summary["prompt"] = prompt
    summary["runs"] = [as_row(r) for r in results]
    if keep is not None:
        keep.extend(results)
    return summary
