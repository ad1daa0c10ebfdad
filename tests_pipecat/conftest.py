"""Pipecat's tests run in their own environment (``make test-pipecat``: ``requirements-pipecat.lock``,
since ``pipecat-ai`` needs protobuf<7), against a real speech server on loopback with the real model."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.conftest import model_dir
from tests.helpers import RunningServer, start_speech_server

from streamvoice.engine import KokoroEngine
from streamvoice.engine.voice_stats_cache import prepare


@pytest.fixture(scope="session")
def speech_server() -> Iterator[RunningServer]:
    engine = KokoroEngine.load(model_dir())
    prepare(engine)
    server = start_speech_server(engine)
    yield server
    server.stop()
