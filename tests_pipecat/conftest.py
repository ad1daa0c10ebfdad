"""Pipecat's tests run in their own environment (``make test-pipecat``: ``requirements-pipecat.lock``,
since ``pipecat-ai`` needs protobuf<7), against the same real speech server on loopback, with the real
model, that the main suite uses: its fixtures are imported from ``tests/conftest.py``, not copied."""

from tests.conftest import engine, kokoro_dir, speech_server

__all__ = ["engine", "kokoro_dir", "speech_server"]
