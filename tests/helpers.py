"""What the tests share: real servers on loopback built as their commands build them, and small readers.

Tests import these from here, never from each other or from the benchmarks.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import time
from typing import Any

import httpx
import numpy as np
import pytest

from streamvoice.asgi import free_port
from streamvoice.bench.loopback import LoopbackServer
from streamvoice.engine import KokoroEngine
from streamvoice.engine.options import EngineOptions
from streamvoice.server import ServerConfig
from streamvoice.server.runner import DrainingServer, build_server

__all__ = [
    "TRAIN_SENTENCE",
    "VENDOR_TOKEN",
    "WORDS",
    "RunningServer",
    "agent_turns",
    "answers",
    "collect",
    "cpu_seconds",
    "first_words",
    "free_port",
    "livekit_audio",
    "metric",
    "on_each_chunk",
    "pcm16",
    "ping",
    "rss_mb",
    "speak",
    "start_agent",
    "start_speech_server",
    "wait_for",
]


VENDOR_TOKEN = "vendor-key"  # the key every vendor client sends: the vendor servers' AUTH_TOKEN
TRAIN_SENTENCE = "The train to Lisbon leaves from platform four at ten past nine."
WORDS = "alpha beta gamma, delta. Thing and word " * 5_000  # 200 KB of words with sentence ends


class RunningServer(LoopbackServer):
    """A real uvicorn server on a loopback port, in a thread of this process (the benchmarks' server)."""

    drainer: DrainingServer  # set for speech servers: request_shutdown() is what SIGTERM does

    def start(self, timeout: float = 300.0) -> RunningServer:
        # A wait for an event, not a bound on speed: a warm-up of the torch engine beside a busy suite took
        # over a minute in a clean-clone CI run (tests_torch/test_served.py).
        super().start(timeout)
        return self


def system_binary(*names: str, package: str) -> str:
    """A Debian package's program the tests drive (chromium, haproxy, redis-server). Missing, the test is
    skipped with the one command that installs it, except in CI (``CI`` set), where it fails: CI runs
    everything (``make test`` installs the packages when it runs as root)."""
    for name in names:
        if found := shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin"):
            return found
    why = f"{names[0]} not found: install Debian's {package} (sudo apt-get install -y {package})"
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(why)
    pytest.skip(why + "; CI runs this test")


def worker_threads() -> int:
    """Each pytest-xdist worker's share of the cores, for the models it runs (ONNX Runtime, Whisper): the
    suite is CPU-bound, and on 2 cores two workers of 2 threads each spent 21 % more CPU on the same speech
    than of 1 (30 s of audio: 10.8 vs 8.9 CPU s), while one worker alone keeps every core."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    return max(1, (os.cpu_count() or 1) // workers)


def worker_engine_options() -> EngineOptions:
    return EngineOptions(intra_op_threads=worker_threads())


def start_speech_server(engine: KokoroEngine, sndbuf: int | None = None, **config: object) -> RunningServer:
    """The speech server exactly as ``streamvoice serve`` builds it (transport limits included).

    Three settings differ unless a test gives them: no warm-up (the engine fixture loaded and calibrated the
    model once; a warm-up also times windows, ~5 s per server), admission counting four listeners, not
    a measure of the machine, and no shedding when the machine slows down (``core/watch.py``; a busy CI
    machine is a slow one), so a test's answers do not change with what else the machine is doing
    (``test_admission.py`` warms up and measures as a command does; ``test_watch.py`` sheds).

    ``sndbuf``: a small kernel send buffer for every connection (accepted sockets inherit the listener's),
    so a client that stops reading blocks the server's sends within kilobytes instead of megabytes.
    """
    config = {"warm_up": False, "admission_listeners": 4, "admission_shed": False, **config}
    sockets = None
    if sndbuf is not None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        listener.bind(("127.0.0.1", 0))
        sockets = [listener]
    port = sockets[0].getsockname()[1] if sockets else free_port()
    cfg = ServerConfig(port=port, **config)  # type: ignore[arg-type]
    drainer = build_server(cfg, engine, log_level="warning")
    server = RunningServer(drainer.app, port, server=drainer.server, sockets=sockets)
    server.drainer = drainer
    return server.start()


def start_agent(source: object, speech_url: str, **config: object) -> RunningServer:
    from streamvoice.agent.app import create_agent_app
    from streamvoice.agent.config import AgentConfig

    app = create_agent_app(source, AgentConfig(speech_url=speech_url, **config))  # type: ignore[arg-type]
    return RunningServer(app, free_port()).start()


def cpu_seconds(fn: Any, repeat: int = 3) -> float:
    """The least CPU time this thread spent in ``fn()`` over ``repeat`` calls: the work it does, which a
    process busy beside it does not change (the wall clock would). Tests compare two of these (a cost that
    grows with the text, not its square), never one against a number of seconds."""
    best = float("inf")
    for _ in range(repeat):
        started = time.thread_time()
        fn()
        best = min(best, time.thread_time() - started)
    return best


async def livekit_audio(stream: Any, heard_first: asyncio.Event | None = None) -> tuple[Any, list[Any]]:
    """What a LiveKit TTS stream (ours or a vendor plugin) gave: its audio as float32 samples and its timed
    words; ``heard_first`` is set at the first frame with audio, for tests that end the input only then."""
    import numpy as np
    from livekit.agents.tts.tts import USERDATA_TIMED_TRANSCRIPT

    pcm, words = bytearray(), []
    async for event in stream:
        if heard_first is not None and len(event.frame.data):
            heard_first.set()
        pcm += bytes(event.frame.data)
        words += event.frame.userdata.get(USERDATA_TIMED_TRANSCRIPT) or []
    return np.frombuffer(bytes(pcm), "<i2").astype(np.float32) / 32768, words


def on_each_chunk(monkeypatch: Any, planner: Any, hook: Any) -> None:
    """``hook(chunk)`` runs on the planning thread before each chunk the server plans (``plan_chunk``, the
    unit of planning a server takes turns with): to record the thread's order of turns, or to hold it."""
    plan_chunk = planner.plan_chunk

    def hooked(chunk: str, lang: str, paragraph_end: bool = False) -> Any:
        hook(chunk)
        return plan_chunk(chunk, lang, paragraph_end)

    monkeypatch.setattr(planner, "plan_chunk", hooked)


def metric(server: RunningServer, name: str, token: str | None = None) -> float:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    for line in httpx.get(server.url + "/metrics", headers=headers).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise KeyError(name)


async def wait_for(predicate: Any, timeout: float = 60.0) -> None:
    """Until ``predicate()`` holds; the timeout is generous, for a machine that is busy, never a bound."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached in {timeout:g} s")
        await asyncio.sleep(0.05)


async def collect(ws: Any, until: int, timeout: float = 90) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Read frames until ``until`` answers (complete or error) arrived; count audio bytes per message id."""
    controls: list[dict[str, Any]] = []
    audio: dict[str, int] = {}
    current = None
    answers = 0
    async with asyncio.timeout(timeout):
        while answers < until:
            frame = await ws.recv()
            try:
                obj = json.loads(frame)
                is_control = isinstance(obj, dict)
            except (ValueError, UnicodeDecodeError):
                is_control = False
            if not is_control:
                assert isinstance(frame, bytes), "audio must travel as binary frames"
                assert current is not None, "audio arrived outside a synthesis"
                audio[current] = audio.get(current, 0) + len(frame)
                continue
            assert isinstance(frame, str), "control must travel as text frames"
            controls.append(obj)
            if obj["type"] == "synthesis_started":
                current = obj["id"]
            if obj["type"] in ("synthesis_complete", "error"):
                answers += 1
                current = None
    return controls, audio


async def answers(ws: Any, n: int, timeout: float = 90) -> list[dict[str, Any]]:
    """The next ``n`` answers (complete or error), skipping audio and other control frames."""
    answers: list[dict[str, Any]] = []
    async with asyncio.timeout(timeout):
        while len(answers) < n:
            frame = await ws.recv()
            if isinstance(frame, str) and (event := json.loads(frame))["type"] in (
                "synthesis_complete",
                "error",
            ):
                answers.append(event)
    return answers


async def speak(ws: Any, message: dict[str, Any], timeout: float = 90) -> tuple[dict[str, Any], Any]:
    """Send one synthesize message; its answer (complete or error) and its audio as float32 samples."""
    import numpy as np

    await ws.send(json.dumps(message))
    audio = b""
    async with asyncio.timeout(timeout):
        while True:
            frame = await ws.recv()
            if isinstance(frame, bytes):
                audio += frame
                continue
            event = json.loads(frame)
            if event["type"] in ("synthesis_complete", "error"):
                return event, np.frombuffer(audio, "<i2").astype(np.float32) / 32768


async def ping(server: RunningServer) -> int:
    async with httpx.AsyncClient(timeout=60) as client:
        return (await client.get(server.url + "/ping")).status_code


def rss_mb() -> float:
    """This process's resident memory: the servers under test run in it."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def agent_turns(agent: RunningServer) -> int:
    """Turns the agent is running now (its app's own count)."""
    app: Any = agent.server.config.app
    return int(app.turns)


def pcm16(data: bytes) -> np.ndarray:
    """Little-endian 16-bit PCM as float32 (a trailing odd byte of a cut stream dropped)."""
    return np.frombuffer(data[: len(data) // 2 * 2], "<i2").astype(np.float32) / 32768


def first_words(chars: list[str], starts: list[float]) -> list[tuple[str, float]]:
    """Words and their first character's time from a per-character alignment."""
    words: list[tuple[str, float]] = []
    current, at = "", 0.0
    for ch, t in zip(chars, starts, strict=True):
        if ch.isspace():
            if current:
                words.append((current, at))
            current = ""
        else:
            if not current:
                at = t
            current += ch
    if current:
        words.append((current, at))
    return words
