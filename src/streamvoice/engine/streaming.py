"""In-piece streaming: decode Kokoro's audio in windows, so first audio stops waiting for the whole piece.

On CPU the ISTFTNet decoder is ~96% of a model call and it is convolutional over time. We split the
exported graph in two at the tensors where the decoder starts:

- front (text encoder + prosody predictor): tokens, style, speed -> aligned features ``asr`` [1, C, F],
  the F0 and energy curves [1, 2F], and the harmonic source's accumulated phase [1, H, 2F];
- decoder: those tensors (any time slice of them) + style -> audio, 600 samples per frame.

The front runs once per piece; the decoder then runs on overlapping frame windows (a small first window for
early audio, larger ones after for throughput), each with context on both sides that is computed and
thrown away, and neighbouring windows are crossfaded over a few milliseconds.

The phase is the subtle part: the sine source integrates F0 over time (a cumulative sum), so a window that
recomputed it would restart every harmonic at phase zero. Cutting the graph *after* that cumulative sum
makes the front compute the phase for the whole piece once; every window slices the same continuous phase.
The decoder's instance norms do use per-window statistics; the benchmark measures what that costs
(speech-to-text, spectral distance, seam energy).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray

log = logging.getLogger("streamvoice.engine")

SAMPLES_PER_FRAME = 600  # 24 kHz audio, 40 aligned frames per second


class GraphSplitError(RuntimeError):
    """The model's graph does not have the structure in-piece streaming needs."""


@dataclass(frozen=True)
class Boundary:
    asr: str
    f0: str
    noise: str
    phase: str

    @property
    def names(self) -> list[str]:
        return [self.asr, self.f0, self.noise, self.phase]


def find_boundary(graph: Any) -> Boundary:
    """Locate the decoder's input tensors by the structure around them, not by export-specific ids.

    - F0 and energy curves: the inputs of the decoder's first two Unsqueeze nodes (``/decoder/decoder/
      Unsqueeze`` and ``..._1``), which feed ``F0_conv`` and ``N_conv``.
    - ``asr``: the first input of the decoder's top-level Concat (features, F0 conv, N conv).
    - phase: the input of the sine generator's upsampling Resize (the one just before ``Sin``).
    """
    by_name = {n.name: n for n in graph.node}

    def node(pattern: str) -> Any:
        rx = re.compile(pattern)
        found = [n for name, n in by_name.items() if rx.search(name)]
        if len(found) != 1:
            raise GraphSplitError(f"expected one node matching {pattern!r}, found {len(found)}")
        return found[0]

    f0 = node(r"^/decoder/decoder/Unsqueeze$").input[0]
    noise = node(r"^/decoder/decoder/Unsqueeze_1$").input[0]
    asr = node(r"^/decoder/decoder/Concat$").input[0]
    phase = node(r"/m_source/l_sin_gen/Resize_1$").input[0]
    return Boundary(asr=asr, f0=f0, noise=noise, phase=phase)


def split_model(model_path: Path) -> tuple[bytes, bytes, Boundary]:
    """Extract the front and decoder subgraphs as serialized models."""
    try:
        import onnx
        from onnx.utils import Extractor
    except ImportError as exc:  # pragma: no cover - onnx is a dependency
        raise GraphSplitError("the onnx package is needed to split the graph") from exc
    model = onnx.load(str(model_path))
    boundary = find_boundary(model.graph)
    inputs = [i.name for i in model.graph.input]
    if not {"style", "speed"} <= set(inputs):
        raise GraphSplitError(f"unexpected model inputs {inputs}")
    extractor = Extractor(model)
    front = extractor.extract_model(inputs, boundary.names)
    decoder = extractor.extract_model([*boundary.names, "style"], [model.graph.output[0].name])
    decoder_inputs = {i.name for i in decoder.graph.input}
    if decoder_inputs - {*boundary.names, "style"}:
        raise GraphSplitError(
            f"the decoder still needs {sorted(decoder_inputs - {*boundary.names, 'style'})}"
        )
    return front.SerializeToString(), decoder.SerializeToString(), boundary


@dataclass(frozen=True)
class WindowPlan:
    """Window sizes in aligned frames (25 ms each)."""

    first: int = 12  # 0.3 s: first audio as early as possible
    second: int = 16  # must decode (with its context) within the first window's 0.3 s of playback
    # Each window grows by this factor: large enough to keep the count (and the recomputed context) low,
    # small enough that each window is decoded before the audio ahead of it has played (2 cores, int8).
    growth: float = 2.2
    largest: int = 400  # up to 10 s
    context: int = 6  # frames of context on each side, computed and discarded
    # The decoder's instance norms take statistics over the window; a first window that is mostly the
    # model's leading silence gets its noise floor normalised up. Looking further ahead fixes that.
    first_lookahead: int = 20
    crossfade: int = 240  # samples (10 ms) blended at each seam

    def windows(self, frames: int) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        start, size = 0, self.first
        while start < frames:
            end = min(frames, start + size)
            if frames - end < size // 2:  # fold a small tail into this window
                end = frames
            spans.append((start, end))
            start = end
            size = (
                self.second if len(spans) == 1 else min(self.largest, max(size + 1, int(size * self.growth)))
            )
        return spans


class SplitKokoro:
    """Front + decoder sessions; yields audio window by window."""

    def __init__(self, model_path: Path, options: ort.SessionOptions, providers: list[str]) -> None:
        front, decoder, boundary = split_model(model_path)
        self.boundary = boundary
        self.front = ort.InferenceSession(front, sess_options=options, providers=providers)
        self.decoder = ort.InferenceSession(decoder, sess_options=options, providers=providers)
        self._front_outputs = [o.name for o in self.front.get_outputs()]

    def features(self, feeds: dict[str, NDArray[Any]]) -> dict[str, NDArray[np.float32]]:
        outputs = self.front.run(self._front_outputs, feeds)
        return dict(zip(self._front_outputs, outputs, strict=True))

    def decode(
        self, feats: dict[str, NDArray[np.float32]], style: NDArray[np.float32], a: int, b: int
    ) -> NDArray[np.float32]:
        bd = self.boundary
        feeds = {
            bd.asr: feats[bd.asr][:, :, a:b],
            bd.f0: feats[bd.f0][:, 2 * a : 2 * b],
            bd.noise: feats[bd.noise][:, 2 * a : 2 * b],
            bd.phase: feats[bd.phase][:, :, 2 * a : 2 * b],
            "style": style,
        }
        audio = self.decoder.run(None, feeds)[0]
        return np.asarray(audio, dtype=np.float32).reshape(-1)

    def stream(
        self, feeds: dict[str, NDArray[Any]], style: NDArray[np.float32], plan: WindowPlan
    ) -> Iterator[NDArray[np.float32]]:
        feats = self.features(feeds)
        frames = int(feats[self.boundary.asr].shape[2])
        ctx, xf = plan.context, plan.crossfade
        tail: NDArray[np.float32] | None = None  # end of the previous window, held back for the crossfade
        for start, end in plan.windows(frames):
            right = plan.first_lookahead if start == 0 else ctx
            lo, hi = max(0, start - ctx), min(frames, end + right)
            audio = self.decode(feats, style, lo, hi)
            keep_from = (start - lo) * SAMPLES_PER_FRAME
            keep_to = (end - lo) * SAMPLES_PER_FRAME
            body = audio[keep_from:keep_to]
            if tail is not None:
                # Blend the held-back tail of the last window with this window's view of the same samples.
                overlap = audio[keep_from - len(tail) : keep_from]
                ramp = np.linspace(0.0, 1.0, len(tail), dtype=np.float32)
                yield tail * (1.0 - ramp) + overlap * ramp
            if end >= frames:
                yield body
                return
            hold = min(xf, len(body), ctx * SAMPLES_PER_FRAME)  # the next window's left context covers it
            tail = body[len(body) - hold :].copy() if hold else None
            yield body[: len(body) - hold]


# For a listener who already has audio buffered, first-audio latency no longer matters: bigger windows and
# less recomputed context leave more of the CPU for other sessions.
THROUGHPUT_PLAN = WindowPlan(first=60, second=120, growth=2.0, largest=400, context=6, first_lookahead=6)
