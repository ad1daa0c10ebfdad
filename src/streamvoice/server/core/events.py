"""What an utterance tells its surface, in speaking order: ``PieceStarted``, the piece's ``Words``, its audio
windows, ``PieceEnded``; a caller's ``Marked`` where the text before it has all been spoken; then exactly one
``Completed`` or ``Failed`` (``pytest tests/test_utterance.py``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamvoice.protocol import ProtocolError
from streamvoice.server.core.piece_audio import Words


@dataclass(frozen=True)
class PieceStarted:
    index: int  # 0: the utterance's first audio is next (a surface says "started" here)


@dataclass(frozen=True)
class PieceEnded:
    index: int


@dataclass(frozen=True)
class Completed:
    samples: int  # at the model's rate
    pieces: int


@dataclass(frozen=True)
class Failed:
    error: ProtocolError


@dataclass(frozen=True)
class Marked:
    """A caller's mark (``Utterance.mark``): every piece of the text before it has been spoken."""

    label: int


Audio = NDArray[np.float32]
Event = PieceStarted | Words | Audio | PieceEnded | Marked | Completed | Failed

CANCELLED = "cancelled before it finished"
