"""Shared fixtures: the real Kokoro model, a real speech server on loopback, and a real Whisper model."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamvoice.asgi import LoopbackServer, free_port
from streamvoice.engine import KokoroEngine
from streamvoice.server import ServerConfig
from streamvoice.server.runner import DrainingServer, build_server

ROOT = Path(__file__).resolve().parents[1]


def model_dir() -> Path:
    configured = os.environ.get("KOKORO_MODEL_DIR")
    path = Path(configured) if configured else ROOT.parent / "shared" / "kokoro"
    if not (path / "voices-v1.0.bin").is_file():
        pytest.fail(
            f"Kokoro model files not found in {path}. Set KOKORO_MODEL_DIR to a folder with "
            "kokoro-v1.0.int8.onnx and voices-v1.0.bin, or run `streamvoice models download`."
        )
    return path


@pytest.fixture(scope="session")
def kokoro_dir() -> Path:
    return model_dir()


@pytest.fixture(scope="session")
def engine(kokoro_dir: Path) -> KokoroEngine:
    return KokoroEngine.load(kokoro_dir)


class RunningServer(LoopbackServer):
    """A real uvicorn server on a loopback port, in a thread of this process (the benchmarks' server)."""

    drainer: DrainingServer  # set for speech servers: request_shutdown() is what SIGTERM does

    def start(self, timeout: float = 60.0) -> RunningServer:
        super().start(timeout)
        return self


def start_speech_server(engine: KokoroEngine, sndbuf: int | None = None, **config: object) -> RunningServer:
    """The speech server exactly as ``streamvoice serve`` builds it (transport limits included).

    ``sndbuf``: a small kernel send buffer for every connection (accepted sockets inherit the listener's),
    so a client that stops reading blocks the server's sends within kilobytes instead of megabytes.
    """
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


@pytest.fixture(scope="session")
def speech_server(engine: KokoroEngine) -> Iterator[RunningServer]:
    server = start_speech_server(engine, max_text_chars=2000, max_message_bytes=16 * 1024)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def transcriber(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from streamvoice.bench.asr import Transcriber

    return Transcriber.load(tmp_path_factory.mktemp("whisper"))


@pytest.fixture(scope="session")
def local_llm():  # type: ignore[no-untyped-def]
    """The embedded default language model: llama.cpp in-process with Gemma 3 270M."""
    from streamvoice.agent.llm import LlamaCppSource

    source = LlamaCppSource(threads=2, max_tokens=120)
    source.start()
    return source


def start_agent(source: object, speech_url: str, **config: object) -> RunningServer:
    from streamvoice.agent.app import AgentConfig, create_agent_app

    app = create_agent_app(source, AgentConfig(speech_url=speech_url, **config))  # type: ignore[arg-type]
    return RunningServer(app, free_port()).start()
