"""What a lane (``core.lane``) asks of the server: the model, the scheduler, the load figures it reports to,
and what a piece's decoding reads of its request. The service is one; tests stand in a scripted engine."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from streamvoice.engine.alignment import WordTime
from streamvoice.engine.graphs import RunStop
from streamvoice.engine.planning import Piece
from streamvoice.engine.streaming.windows import WindowCap, WindowPlan
from streamvoice.engine.voices import VoiceSpec
from streamvoice.protocol import Pauses
from streamvoice.server.core.config import ServerConfig
from streamvoice.server.core.load import Load
from streamvoice.server.core.metrics import Metrics
from streamvoice.server.core.scheduler import SynthesisScheduler


class LaneEngine(Protocol):
    @property
    def sample_rate(self) -> int: ...

    def stream_piece(  # ``KokoroEngine.stream_piece``, as the lane calls it
        self, piece: Piece, voice: VoiceSpec, speed: float, windowed: bool, plan: WindowPlan | None, *,
        cap: WindowCap | None, on_words: Callable[[list[WordTime]], None] | None, deadline: float | None,
    ) -> Generator[NDArray[np.float32]]: ...  # fmt: skip

    def interruptible(self, stop: RunStop) -> contextlib.AbstractContextManager[None]: ...


class LaneHost(Protocol):
    """What a lane needs of the server: the model, the scheduler, the load figures it reports to."""

    @property
    def engine(self) -> LaneEngine: ...
    @property
    def scheduler(self) -> SynthesisScheduler: ...
    @property
    def load(self) -> Load: ...
    @property
    def metrics(self) -> Metrics: ...
    @property
    def config(self) -> ServerConfig: ...


class PieceRequest(Protocol):
    """What a piece's decoding reads of its request."""

    @property
    def voice(self) -> VoiceSpec: ...
    @property
    def speed(self) -> float: ...
    @property
    def pauses(self) -> Pauses: ...
