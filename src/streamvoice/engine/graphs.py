"""The engine's one seam below its face: a Kokoro graph as ONNX Runtime runs it.

``KokoroEngine`` decides what a piece is (tokens, voice, speed, which statistics steer it, whether its
silences are cut); a ``Graph`` turns that into audio chunks. Two implement it: the export as one session
(``WholeGraph``: whole pieces only, for graphs that do not split) and the front + decoder pair
(``split_kokoro.SplitKokoro``: a piece whole or window by window, the static-int8 decoder being the same
class with another decoder session). A new variant (another decoder graph, another provider) is one class
here, and nothing above the engine changes: ``python -m pytest tests/test_graphs.py`` checks both.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray

from streamvoice.engine.options import session_providers
from streamvoice.engine.streaming.speech_estimate import Reference
from streamvoice.engine.streaming.windows import SAMPLES_PER_FRAME, WindowCap, WindowPlan
from streamvoice.engine.surgery.norm_stats import NormStats


class RunStop:
    """A piece's model runs, stoppable from another thread: a barge-in ends the decoder window in flight
    (up to ~0.4 s of work on 2 cores) instead of letting it run to its end for nobody. ONNX Runtime checks
    the flag between kernels; the run then raises, and the piece, already abandoned, is dropped."""

    def __init__(self) -> None:
        self.options = ort.RunOptions()
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True
        self.options.terminate = True


@dataclass(frozen=True)
class Inputs:
    """How the export names its token input and types its speed (exports differ in both)."""

    tokens: str
    speed_dtype: type[np.generic]

    @classmethod
    def of(cls, session: ort.InferenceSession) -> Inputs:
        inputs = {i.name: i for i in session.get_inputs()}
        speed_type = inputs["speed"].type if "speed" in inputs else "tensor(float)"
        return cls(
            "input_ids" if "input_ids" in inputs else "tokens",
            np.int32 if "int" in speed_type else np.float32,
        )

    def feeds(
        self, tokens: tuple[int, ...], style: NDArray[np.float32], speed: float
    ) -> dict[str, NDArray[Any]]:
        return {
            self.tokens: np.array([[0, *tokens, 0]], dtype=np.int64),  # the two pad tokens
            "style": style,
            "speed": np.array([speed], dtype=self.speed_dtype),
        }


@dataclass(frozen=True)
class Decoding:
    """How one piece is decoded, as the engine decided it.

    ``windowed``: window by window (the stream) or in one decoder call (the reference; a graph that cannot
    window always decodes whole). ``voiced``: the phoneme characters that are speech, so that only the
    frames around them are decoded; None decodes every frame. ``prior``/``silence``: what the voice's
    earlier pieces showed (``norm_stats``); ``remember`` is given this piece's statistics once it is done.
    ``reference``: the voice's reference piece, from which a graph with a ``speech_estimate`` estimates
    this piece's statistics instead (``prior`` and ``remember`` then unused).
    """

    windowed: bool = True
    plan: WindowPlan = field(default_factory=WindowPlan)
    cold_plan: WindowPlan | None = None
    voiced: tuple[int, int] | None = None
    prior: NormStats | None = None
    silence: NormStats | None = None
    remember: Callable[[NormStats], None] | None = None
    reference: Reference | None = None
    cap: WindowCap | None = None
    # When the listener runs out of audio (monotonic s; None: now): what a batching GPU orders pieces by.
    deadline: float | None = None


@dataclass
class Decoded:
    """A piece's audio as (chunk, is the last chunk), and what the front told before any of it."""

    chunks: Iterator[tuple[NDArray[np.float32], bool]]
    first_frame: int  # the model frame the first chunk starts at
    frames: int  # frames the chunks cover
    durations: NDArray[np.int64] | None  # frames per token, pads included (None: the graph hides them)

    @property
    def first_sample(self) -> int:
        return self.first_frame * SAMPLES_PER_FRAME

    @property
    def samples(self) -> int:
        return self.frames * SAMPLES_PER_FRAME


class Graph(Protocol):
    """What the engine needs of a Kokoro graph."""

    @property
    def inputs(self) -> Inputs: ...

    @property
    def windows(self) -> bool:
        """Whether a piece can be decoded window by window (and its statistics measured)."""
        ...

    def decode_piece(
        self, feeds: dict[str, NDArray[Any]], style: NDArray[np.float32], how: Decoding
    ) -> Decoded: ...

    def interruptible(self, stop: RunStop) -> contextlib.AbstractContextManager[None]: ...


class WholeGraph:
    """The export as one session: each piece in one call, silences and all; no durations, no windows."""

    windows = False

    def __init__(self, model: Path, options: ort.SessionOptions, providers: list[str]) -> None:
        self.session = ort.InferenceSession(
            str(model), sess_options=options, providers=session_providers(providers)
        )
        self.inputs = Inputs.of(self.session)

    def decode_piece(
        self, feeds: dict[str, NDArray[Any]], style: NDArray[np.float32], how: Decoding
    ) -> Decoded:
        samples = np.asarray(self.session.run(None, feeds)[0], dtype=np.float32).reshape(-1)
        return Decoded(iter([(samples, True)]), 0, len(samples) // SAMPLES_PER_FRAME, None)

    def interruptible(self, stop: RunStop) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # one call per piece: nothing worth ending early
