"""Kokoro-82M on ONNX Runtime, model files, and voices. Knows nothing about transports."""

from streamvoice.engine.kokoro import KokoroEngine
from streamvoice.engine.options import EngineError, EngineOptions
from streamvoice.engine.planning import Piece
from streamvoice.model_files import ModelFiles, ModelNotFoundError, resolve_model_files

__all__ = [
    "EngineError",
    "EngineOptions",
    "KokoroEngine",
    "ModelFiles",
    "ModelNotFoundError",
    "Piece",
    "resolve_model_files",
]
