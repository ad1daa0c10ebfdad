"""Measuring agent turns over HTTP: each mode's first text and first ``audio_chunk`` against ``agent_start``.

A client of the agent's ``POST /invocations`` (Server-Sent Events), used by ``streamvoice demo`` and by
``agent-infra demo`` against a deployed agent.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Any

import httpx

from streamvoice.client.sse import iter_sse


@dataclass
class RunResult:
    mode: str
    first_text_ms: float | None
    first_audio_ms: float | None
    total_ms: float | None
    chunks: int
    audio_bytes: int
    error: str | None = None


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
        for sse in iter_sse(resp.iter_raw()):
            event = sse.json()
            kind = event.get("type")
            if kind == "text_delta" and result.first_text_ms is None:
                result.first_text_ms = event["t_ms"]
            elif kind == "audio_chunk":
                if result.first_audio_ms is None:
                    result.first_audio_ms = event["t_ms"]
                result.chunks += 1
                result.audio_bytes += len(event["data"]) * 3 // 4
            elif kind == "agent_end":
                result.total_ms = event["t_ms"]
            elif kind == "error":
                result.error = f"{event.get('code')}: {event.get('message')}"
    return result


def summarise(results: list[RunResult]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in ("bidi", "batch"):
        runs = [r for r in results if r.mode == mode and r.error is None]
        row: dict[str, Any] = {
            "runs": len(runs),
            "errors": sum(1 for r in results if r.mode == mode and r.error),
        }
        for key in ("first_text_ms", "first_audio_ms", "total_ms", "chunks"):
            values = [float(getattr(r, key)) for r in runs if getattr(r, key) is not None]
            row[key] = (
                {"median": statistics.median(values), "min": min(values), "max": max(values)}
                if values
                else None
            )
        out[mode] = row
    b, s = out["bidi"]["first_audio_ms"], out["batch"]["first_audio_ms"]
    out["ratio_batch_over_bidi_first_audio"] = round(s["median"] / b["median"], 2) if b and s else None
    return out


def format_table(summary: dict[str, Any]) -> str:
    lines = [f"{'mode':6} {'metric':16} {'median':>9} {'min':>9} {'max':>9}"]
    for mode in ("bidi", "batch"):
        row = summary[mode]
        for key, label in (
            ("first_text_ms", "first text ms"),
            ("first_audio_ms", "first audio ms"),
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
    return "\n".join(lines)


def measure(url: str, prompt: str, runs: int, token: str | None = None, log: Any = None) -> dict[str, Any]:
    run_turn(url, prompt, "bidi", token)  # warm-up: loads caches on every leg; not counted
    results: list[RunResult] = []
    for i in range(runs):
        order = ("bidi", "batch") if i % 2 == 0 else ("batch", "bidi")
        for mode in order:
            r = run_turn(url, prompt, mode, token)
            results.append(r)
            if log:
                log(
                    f"run {i + 1}/{runs} {mode:5}: first audio {r.first_audio_ms} ms, total {r.total_ms} ms"
                    + (f", error {r.error}" if r.error else "")
                )
    summary = summarise(results)
    summary["prompt"] = prompt
    summary["runs"] = [asdict(r) for r in results]
    return summary
