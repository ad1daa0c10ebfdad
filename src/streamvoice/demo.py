"""``streamvoice demo``: bidi vs batch on the same prompt, each mode's first ``audio_chunk`` timestamp
against ``agent_start``, with the whole stack started locally as real processes or against a running agent.

It also writes what it measured, so the difference can be heard and seen (``--out``, default
``demo-out/``): each mode's last run as a WAV that starts when the question was asked, with every chunk
placed where it arrived (the silence the listener waited is in the file, stalls too), and
``timeline.png``: both modes on one time axis, the LLM's text arriving, each piece the speech server cut, the
audio arriving and when speech was heard.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import wave
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np

from streamvoice.asgi import free_port
from streamvoice.bench.common import write_result
from streamvoice.client.agent_turns import RunResult, format_table, measure
from streamvoice.protocol import SAMPLE_RATE

DEFAULT_PROMPT = "Why is the sky blue?"
# The warm-up turn asks the demo's own prompt: the language model's prompt cache is then as warm for the
# first measured run as for every later one, in both modes, so one run compares like with like.
DEFAULT_OUT = "demo-out"


def wait_healthy(url: str, proc: subprocess.Popen[bytes] | None, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{url}: process exited with code {proc.returncode} before becoming healthy")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url.rstrip("/") + "/ping", timeout=2).status_code == 200:
                return
        time.sleep(0.25)
    raise RuntimeError(f"{url} did not become healthy within {timeout:.0f} s")


@contextlib.contextmanager
def local_stack(llm_args: list[str] | None = None, quiet: bool = True) -> Iterator[str]:
    """Start the speech server and the agent (with the local model) as real processes; yield the agent URL."""
    speech_port, agent_port = free_port(), free_port()
    out = subprocess.DEVNULL if quiet else None
    exe = [sys.executable, "-m", "streamvoice.cli"]
    env = dict(os.environ)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        speech = subprocess.Popen(
            [*exe, "serve", "--port", str(speech_port), "--log-level", "warning"],
            stdout=out,
            stderr=out,
            env=env,
        )
        procs.append(speech)
        speech_url = f"http://127.0.0.1:{speech_port}"
        agent = subprocess.Popen(
            [*exe, "agent", "--port", str(agent_port), "--speech-url", speech_url, *(llm_args or [])],
            stdout=out,
            stderr=out,
            env=env,
        )
        procs.append(agent)
        wait_healthy(speech_url, speech)
        agent_url = f"http://127.0.0.1:{agent_port}"
        wait_healthy(agent_url, agent)
        yield agent_url
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()


def placements(run: RunResult) -> list[tuple[int, int]]:
    """(first sample, samples) of each chunk as a listener hears it, from the moment the question was
    asked: a chunk plays when it arrives, or when the one before it ends if that is later."""
    spans, end = [], 0
    for t_ms, size in run.arrivals:
        start = max(int(t_ms * SAMPLE_RATE / 1000), end)
        end = start + size // 2
        spans.append((start, size // 2))
    return spans


def listener_track(run: RunResult) -> np.ndarray:
    """The audio as the listener heard it: the wait before it and any stall are silence in the file."""
    audio = np.frombuffer(run.pcm, dtype="<i2")
    spans = placements(run)
    out = np.zeros(spans[-1][0] + spans[-1][1] if spans else 0, dtype="<i2")
    taken = 0
    for start, n in spans:
        chunk = audio[taken : taken + n]
        out[start : start + chunk.size] = chunk
        taken += n
    return out


def playback(run: RunResult) -> list[tuple[float, float]]:
    """(start s, duration s) of each chunk as it plays (the timeline's audio bars)."""
    return [(start / SAMPLE_RATE, n / SAMPLE_RATE) for start, n in placements(run)]


def write_wav(path: Path, samples: np.ndarray) -> None:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SAMPLE_RATE)
        out.writeframes(samples.astype("<i2").tobytes())


def write_timeline(path: Path, runs: dict[str, RunResult], prompt: str) -> bool:
    """Both modes on one time axis; False (and nothing written) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(len(runs), 1, figsize=(11, 2.1 * len(runs) + 0.8), sharex=True)
    lanes = {"LLM text": 3, "speech pieces": 2, "audio arrives": 1}
    end = max((s + d for r in runs.values() for s, d in playback(r)), default=1.0)
    for ax, (mode, run) in zip(np.atleast_1d(axes), runs.items(), strict=True):
        ax.scatter([t / 1000 for t, _ in run.texts], [3] * len(run.texts), marker="|", s=120, color="#555")
        ax.scatter(
            [t / 1000 for t, _ in run.pieces], [2] * len(run.pieces), marker="v", s=70, color="#d62728"
        )
        for t, text in run.pieces[:6]:
            ax.annotate(
                text[:28] + ("..." if len(text) > 28 else ""), (t / 1000, 2.18), fontsize=7, rotation=12
            )
        ax.broken_barh(playback(run), (0.7, 0.6), color="#1f77b4")
        if run.heard_ms is not None:
            heard = run.heard_ms / 1000
            ax.axvline(heard, color="#2ca02c", lw=2)
            ax.annotate(f"heard {heard:.2f} s", (heard, 3.35), color="#2ca02c", fontsize=9, fontweight="bold")
        ax.set_yticks(list(lanes.values()), list(lanes))
        ax.set_ylim(0.4, 3.8)
        ax.set_xlim(0, end * 1.02)
        ax.set_title(f"{mode}: first audio {run.first_audio_ms or 0:.0f} ms, heard {run.heard_ms or 0:.0f} ms", loc="left", fontsize=10)  # fmt: skip
        ax.grid(axis="x", alpha=0.3)
    np.atleast_1d(axes)[-1].set_xlabel(f'seconds since the question ("{prompt[:60]}")')
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def play(paths: list[Path]) -> None:
    """Play the WAVs one after the other where an audio device exists; say so where none does."""
    player = next((p for p in ("aplay", "paplay", "afplay") if shutil.which(p)), None)
    has_device = sys.platform == "darwin" or Path("/dev/snd").exists() or bool(os.environ.get("PULSE_SERVER"))
    if player is None or not has_device:
        print("--play: no audio device or player (aplay, paplay, afplay) here; play the WAVs elsewhere")
        return
    for path in paths:
        print(f"playing {path} ...")
        subprocess.run([player, str(path)], check=False)


def main(
    prompt: str,
    runs: int,
    endpoint_url: str | None,
    as_json: bool,
    token: str | None = None,
    llm_args: list[str] | None = None,
    out_dir: str = DEFAULT_OUT,
    play_audio: bool = False,
) -> int:
    def log(msg: str) -> None:
        print(msg, file=sys.stderr)

    kept: list[RunResult] = []
    if endpoint_url:
        summary = measure(endpoint_url, prompt, runs, token, log, prompt, kept)
    else:
        log("starting the speech server, the agent and the local model (first start takes a few seconds)...")
        with local_stack(llm_args) as url:
            summary = measure(url, prompt, runs, token, log, prompt, kept)
    last = {
        mode: next((r for r in reversed(kept) if r.mode == mode and r.error is None), None)
        for mode in ("bidi", "batch")
    }
    written = write_outputs(Path(out_dir), {m: r for m, r in last.items() if r is not None}, prompt)
    result = write_result("demo", {"prompt": prompt, "runs_per_mode": runs, "summary": summary})
    summary["files"] = [str(p) for p in [*written, result]]
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        careful = "a careful measurement" if runs >= 3 else "a quick comparison; --runs 3 for a careful one"
        print(f'prompt: "{prompt}"  runs per mode: {runs} ({careful})\n')
        print(format_table(summary))
        print("\nwhat it measured, to hear and see:")
        for path in written:
            print(f"  {path}")
        if not any(p.suffix == ".png" for p in written):
            print(
                "  (no timeline.png: matplotlib is not installed; pip install matplotlib, or 'streamvoice[dev]')"
            )
    if play_audio:
        play([p for p in written if p.suffix == ".wav"])
    return 0 if summary["ratio_batch_over_bidi_first_audio"] is not None else 1


def write_outputs(out: Path, runs: dict[str, RunResult], prompt: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for mode, run in runs.items():
        path = out / f"{mode}.wav"
        write_wav(path, listener_track(run))
        written.append(path)
    timeline = out / "timeline.png"
    if runs and write_timeline(timeline, runs, prompt):
        written.append(timeline)
    (out / "timeline.json").write_text(
        json.dumps(
            {
                mode: {
                    "texts": run.texts,
                    "pieces": run.pieces,
                    "arrivals": run.arrivals,
                    "first_audio_ms": run.first_audio_ms,
                    "heard_ms": run.heard_ms,
                }
                for mode, run in runs.items()
            }
        )
    )
    written.append(out / "timeline.json")
    return written
