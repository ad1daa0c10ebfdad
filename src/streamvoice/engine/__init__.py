"""Kokoro-82M: the engine's one face (``kokoro.KokoroEngine``: pieces in, audio out), model files and voices.
Knows nothing about transports. Its rooms: ``surgery/`` (cutting and rewriting the official ONNX graph),
``static_int8/`` (the CPU's derived static-int8 graphs), ``streaming/`` (in-piece streaming on ONNX Runtime:
windows, the statistics they normalise with), ``torch_kokoro/`` (the PyTorch engine for a GPU), ``g2p/``.

Names load on first use: a GPU device machine imports ``engine.torch_kokoro`` without the CPU engine's G2P
packages (kokoro-onnx, espeak), which this package's eager imports would pull in.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamvoice.engine.kokoro import KokoroEngine
    from streamvoice.engine.options import EngineError, EngineOptions
    from streamvoice.engine.planning import Piece
    from streamvoice.model_files import ModelFiles, ModelNotFoundError, resolve_model_files

_WHERE = {
    "KokoroEngine": "streamvoice.engine.kokoro",
    "EngineError": "streamvoice.engine.options",
    "EngineOptions": "streamvoice.engine.options",
    "Piece": "streamvoice.engine.planning",
    "ModelFiles": "streamvoice.model_files",
    "ModelNotFoundError": "streamvoice.model_files",
    "resolve_model_files": "streamvoice.model_files",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)


__all__ = [
    "EngineError",
    "EngineOptions",
    "KokoroEngine",
    "ModelFiles",
    "ModelNotFoundError",
    "Piece",
    "resolve_model_files",
]
