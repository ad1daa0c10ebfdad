"""Pipecat's tests run in their own environment (``make test-pipecat``: ``requirements-pipecat.lock``,
since ``pipecat-ai`` needs protobuf<7), on the main suite's fixtures: the real model and a real speech
server on loopback."""

from tests.conftest import engine, kokoro_dir, speech_server

__all__ = ["engine", "kokoro_dir", "speech_server"]
