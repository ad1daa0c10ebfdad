"""``streamvoice demo``: bidi vs batch on the same prompt, each mode's first ``audio_chunk`` timestamp
against ``agent_start``, with the whole stack started locally as real processes or against a running agent.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx

from streamvoice.asgi import free_port
from streamvoice.client.agent_turns import format_table, measure

DEFAULT_PROMPT = "Why is the sky blue?"


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


def main(
    prompt: str,
    runs: int,
    endpoint_url: str | None,
    as_json: bool,
    token: str | None = None,
    llm_args: list[str] | None = None,
) -> int:
    def log(msg: str) -> None:
        print(msg, file=sys.stderr)

    if endpoint_url:
        summary = measure(endpoint_url, prompt, runs, token, log)
    else:
        log("starting the speech server, the agent and the local model (first start takes a few seconds)...")
        with local_stack(llm_args) as url:
            summary = measure(url, prompt, runs, token, log)
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        print(f'prompt: "{prompt}"  runs per mode: {runs}\n')
        print(format_table(summary))
    return 0 if summary["ratio_batch_over_bidi_first_audio"] is not None else 1
