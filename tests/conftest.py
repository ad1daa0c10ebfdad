"""Shared fixtures: the real Kokoro model, a real speech server on loopback, and a real Whisper model."""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from streamvoice.engine import KokoroEngine
from streamvoice.engine.streaming.voice_stats_cache import default_dir, prepare
from streamvoice.model_files import user_cache_dir
from streamvoice.store import Store, open_store
from tests.fakes import ScriptedGraph, scripted_engine
from tests.helpers import (
    VENDOR_TOKEN,
    RunningServer,
    start_speech_server,
    worker_engine_options,
    worker_threads,
)
from tests.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[1]
# What servers and agents keep by default (the embedded store, in the user data folder) goes to a folder of
# this run's own: no run reads what an earlier one made, and nothing is left in the user's home.
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="streamvoice-test-data-")


# The modules whose tests take longest, longest first (`python -m tests.durations`): pytest-xdist hands
# whole files to its workers in collection order (`--dist loadfile --no-loadscope-reorder`), so these start
# first and the last minutes are short files on both workers, not one long file on one of them.
SLOWEST_FIRST = (
    "test_locales_heard.py",
    "test_pronounce.py",
    "test_languages.py",
    "test_admission.py",
    "test_static_decoder.py",
    "test_vendor_plugins.py",
    "test_conversation_history.py",
    "test_watch.py",
    "test_streaming_engine.py",
    "test_agent.py",
    "test_deepgram_flux.py",
    "test_dictionaries.py",
    "test_elevenlabs.py",
    "test_listener.py",
    "test_wyoming.py",
    "test_scale_out.py",
    "test_openai_api.py",
    "test_batching.py",
    "test_normalize.py",
    "test_heard_audio.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: place for place, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def model_dir() -> Path:
    """Where the model is: ``KOKORO_MODEL_DIR`` when set, else the shared folder beside the clone (dev and
    CI), else the user cache, where ``streamvoice models download`` (and ``make test`` on a bare clone)
    puts the official files."""
    configured = os.environ.get("KOKORO_MODEL_DIR")
    candidates = [Path(configured)] if configured else [ROOT.parent / "shared" / "kokoro", user_cache_dir()]
    for path in candidates:
        if (path / "voices-v1.0.bin").is_file() and (path / "kokoro-v1.0.int8.onnx").is_file():
            return path
    pytest.fail(
        "Kokoro model files not found (looked in " + ", ".join(map(str, candidates)) + "): run "
        "`make test` (it fetches them), `.venv/bin/streamvoice models download`, or set KOKORO_MODEL_DIR to a "
        "folder with kokoro-v1.0.int8.onnx and voices-v1.0.bin."
    )


@pytest.fixture(scope="session")
def kokoro_dir() -> Path:
    return model_dir()


@pytest.fixture(scope="session")
def engine(kokoro_dir: Path) -> KokoroEngine:
    engine = KokoroEngine.load(kokoro_dir, options=worker_engine_options())
    # As a server does at start: every stock voice's decoder statistics, calibrated once and cached on disk.
    # `make test` runs Pipecat's tests beside these: one process calibrates, the other waits and loads the file.
    lock_path = default_dir() / "voice-stats.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        prepare(engine)
    return engine


@pytest.fixture(scope="session")
def exported_engine(kokoro_dir: Path) -> KokoroEngine:
    """The int8 file's graph as exported (``MODEL_VARIANT=int8``): what the static-int8 decoder and the
    graphs' seam are judged against."""
    return KokoroEngine.load(kokoro_dir, "int8", worker_engine_options())


@pytest.fixture(scope="session")
def scripted(kokoro_dir: Path) -> KokoroEngine:
    """The engine as shipped over a scripted graph (``fakes.ScriptedGraph``): for tests whose property is a
    wire's shape, order or error codes; what the speech sounds like is the real model's tests'."""
    return scripted_engine(kokoro_dir)


@pytest.fixture(scope="session")
def busy_scripted(kokoro_dir: Path) -> KokoroEngine:
    """A scripted engine whose windows take time (5 ms a frame, asleep): answers that last while others
    arrive, as the model's do, without the model's CPU."""
    return scripted_engine(kokoro_dir, ScriptedGraph(seconds_per_frame=0.005))


@pytest.fixture(scope="session")
def scripted_server(scripted: KokoroEngine) -> Iterator[RunningServer]:
    """``speech_server``'s settings over the scripted engine."""
    server = start_speech_server(scripted, max_text_chars=2000, max_message_bytes=16 * 1024)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def speech_server(engine: KokoroEngine) -> Iterator[RunningServer]:
    """The real model behind the server as ``streamvoice serve`` builds it, without its warm-up: the engine
    fixture loaded and calibrated the model, and the warm-up's G2P loads and window timing (~10 s of CPU in
    each worker) are ``test_admission.py``'s, which starts a server that warms up as a command does."""
    server = start_speech_server(engine, max_text_chars=2000, max_message_bytes=16 * 1024)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def vendor_server(engine: KokoroEngine) -> Iterator[RunningServer]:
    """The server the vendor SDKs' tests share (ElevenLabs, Cartesia, Deepgram): their key is its token."""
    server = start_speech_server(engine, auth_token=VENDOR_TOKEN, admission_listeners=4)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def transcriber(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from streamvoice.bench.asr import Transcriber

    return Transcriber.load(tmp_path_factory.mktemp("whisper"), worker_threads())


@pytest.fixture(scope="session")
def float32_transcriber(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """Whisper base in float32, for a test where one word decides: CTranslate2's int8 kernels differ by
    CPU, so int8 hears the same clip differently on an Intel Xeon and an AMD EPYC (docs/benchmarks.md 7b)."""
    from streamvoice.bench.asr import Transcriber

    return Transcriber.load(tmp_path_factory.mktemp("whisper32"), worker_threads(), "float32")


@pytest.fixture(scope="session")
def local_llm():  # type: ignore[no-untyped-def]
    """The embedded default language model: llama.cpp in-process with Gemma 3 270M. One thread at normal
    priority: the shipped default (two threads at nice 10, so the speech model wins a shared CPU) starves
    when another process keeps a core busy, as on a shared CI machine (three tests took 120 s each and a turn
    timed out), and what these tests check is that the model answers, not how it shares a CPU."""
    from streamvoice.agent.local_llm import LlamaCppSource

    source = LlamaCppSource(threads=1, max_tokens=120, nice=0)
    source.start()
    return source


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One real Redis for the session's tests that need one (each test uses its own keys)."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """The store's one interface on each backend: a fresh SQLite file, and the session's real Redis (each
    test keeps apart by its own names)."""
    if request.param == "sqlite":
        opened = open_store(f"sqlite://{tmp_path / 'store.sqlite3'}")
    else:
        redis: RedisServer = request.getfixturevalue("redis_server")
        opened = open_store(redis.url)
    yield opened
    await opened.close()
