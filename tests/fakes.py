"""Stand-ins for the model, for tests of the server's logic (lanes, utterances) that must not wait for it:
each typed against the ``Protocol`` the server declares for what it needs, so they cannot drift from it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamvoice.engine import KokoroEngine
from streamvoice.engine.alignment import WordTime
from streamvoice.engine.graphs import Decoded, Decoding, Inputs, RunStop
from streamvoice.engine.planning import Piece
from streamvoice.engine.streaming.windows import SAMPLES_PER_FRAME
from streamvoice.engine.timing import decode_range
from streamvoice.model_files import ModelFiles
from streamvoice.protocol import DEFAULT_PAUSES, ErrorCode, Pauses, ProtocolError
from streamvoice.server.core.config import ServerConfig
from streamvoice.server.core.load import Load
from streamvoice.server.core.metrics import Metrics
from streamvoice.server.core.requests import ResolvedRequest
from streamvoice.server.core.scheduler import SynthesisScheduler


@dataclass
class FakeEngine:
    """Yields a fixed number of one-second windows per piece, instantly: the lane's logic, not the model's."""

    windows_per_piece: int = 20
    sample_rate: int = 24_000
    decoded: int = 0
    window_samples: int = 24_000
    slow_window_s: float = 0.3  # a piece whose text is "slow" takes this long per window
    words: bool = False  # report each piece's word times (one per word, 0-100 ms) before its audio

    def interruptible(self, stop: RunStop) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def stream_piece(self, piece: Any, voice: Any, speed: float, windowed: bool, plan: Any, cap: Any,
                     on_words: Any = None, *, deadline: float | None = None
                     ) -> Generator[NDArray[np.float32]]:  # fmt: skip
        if self.words and on_words is not None:
            on_words(words_of(piece))
        for _ in range(self.windows_per_piece):
            if piece.text == "boom.":
                raise RuntimeError("the model failed")
            if piece.text == "slow":
                time.sleep(self.slow_window_s)
            self.decoded += 1
            yield np.zeros(self.window_samples, dtype=np.float32)


@dataclass
class FakeHost:
    """What a lane needs of the server (``lane_host.LaneHost``), with the engine stood in for."""

    engine: FakeEngine = field(default_factory=FakeEngine)
    config: ServerConfig = field(default_factory=ServerConfig)
    metrics: Metrics = field(default_factory=Metrics)
    scheduler: SynthesisScheduler = field(default_factory=SynthesisScheduler)
    load: Load = field(default_factory=lambda: Load(workers=1, configured_listeners=4, rtf=0.3))


@dataclass(frozen=True)
class FakeRequest:
    voice: Any = None  # the stand-in engine reads no voice
    speed: float = 1.0
    pauses: Pauses = DEFAULT_PAUSES


class FakePieceSource:
    """Plans one piece per sentence (text split at ". "), on the event loop; nothing speakable raises
    ``empty_text`` as the service does. ``fail_on``: a sentence whose planning raises."""

    sample_rate = 24_000

    def __init__(self, fail_on: str | None = None) -> None:
        self.fail_on = fail_on
        self.planned: list[str] = []

    async def plan(
        self, request: ResolvedRequest, grew: Callable[[int], None] = lambda chars: None
    ) -> AsyncIterator[Piece]:
        sentences = [s.strip() for s in request.text.replace(". ", ".\n").splitlines() if s.strip()]
        spoken = [s for s in sentences if any(ch.isalnum() for ch in s)]
        if not spoken:
            raise ProtocolError(ErrorCode.EMPTY_TEXT, "nothing speakable")
        for sentence in spoken:
            if sentence == self.fail_on:
                raise ProtocolError(ErrorCode.INVALID_SSML, f"bad at {sentence!r}")
            self.planned.append(sentence)
            yield Piece(sentence, sentence, (1,))


def words_of(piece: Piece) -> list[WordTime]:
    return [WordTime(w, 0.0, 100.0) for w in piece.text.split()]


@dataclass(eq=False)
class FakeListener:
    """A slot holder as the core reads one (``core.listener.Listener``): by default it cannot tell when its
    speech ends (``until`` None), has no lane, and hands its slot over at a pause, as a socket does."""

    until: float | None = None
    hands_over: bool = True
    lane: Any = None
    told: ProtocolError | None = None
    tenant: Any = None  # whose key it serves (``store.keys.Tenant``), None: a server without keys

    def speaking_until(self) -> float | None:
        return self.until

    def shed(self, error: ProtocolError) -> None:
        self.told = error


class ScriptedGraph:
    """A Kokoro graph whose arithmetic is a script (``engine.graphs.Graph``): every token lasts
    ``frames_per_token`` frames of a quiet tone (at speed 1), the two pads ``pad_frames`` of silence, so the
    engine above it (planning, trimming, word times, windows) and the whole server run as shipped, at no
    model cost. For tests whose property is a wire's shape, order or error codes, not the sound.
    ``seconds_per_frame``: how long each window takes (asleep: the model busy, the CPU free)."""

    windows = True
    inputs = Inputs("tokens", np.float32)

    def __init__(
        self, frames_per_token: int = 3, pad_frames: int = 8, seconds_per_frame: float = 0.0
    ) -> None:
        self.frames_per_token = frames_per_token
        self.pad_frames = pad_frames
        self.seconds_per_frame = seconds_per_frame
        self.calls = 0

    def interruptible(self, stop: RunStop) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def decode_piece(self, feeds: dict[str, Any], style: Any, how: Decoding) -> Decoded:
        self.calls += 1
        tokens = int(feeds["tokens"].shape[1])
        speed = float(feeds["speed"][0])
        per_token = max(1, round(self.frames_per_token / speed))
        durations = np.array([self.pad_frames] + [per_token] * (tokens - 2) + [self.pad_frames], np.int64)
        frames = int(durations.sum())
        t = np.arange(frames * SAMPLES_PER_FRAME) / 24_000
        audio = (0.2 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
        audio[: self.pad_frames * SAMPLES_PER_FRAME] = 0.0
        audio[(frames - self.pad_frames) * SAMPLES_PER_FRAME :] = 0.0
        if not how.windowed:
            time.sleep(frames * self.seconds_per_frame)
            return Decoded(iter([(audio, True)]), 0, frames, durations)
        first, last = (0, frames) if how.voiced is None else decode_range(durations, how.voiced, frames)
        plan = how.plan if how.prior is not None else (how.cold_plan or how.plan)

        def chunks() -> Iterator[tuple[NDArray[np.float32], bool]]:
            for a, b in plan.iter_windows(last - first, how.cap):
                time.sleep((b - a) * self.seconds_per_frame)
                yield (
                    audio[(first + a) * SAMPLES_PER_FRAME : (first + b) * SAMPLES_PER_FRAME],
                    first + b >= last,
                )

        return Decoded(chunks(), first, last - first, durations)


def scripted_engine(kokoro_dir: Path, graph: ScriptedGraph | None = None) -> KokoroEngine:
    """The engine as shipped (voices, G2P, planning, trimming, word times) over a ``ScriptedGraph``."""
    files = ModelFiles(model=kokoro_dir / "kokoro-v1.0.int8.onnx", voices=kokoro_dir / "voices-v1.0.bin")
    return KokoroEngine(files, graph=graph or ScriptedGraph())
