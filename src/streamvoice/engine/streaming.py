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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray

from streamvoice.engine.norm_stats import (
    BLEND_PRIOR,
    BLEND_WINDOW,
    NormStats,
    add_prior_inputs,
    find_norms,
    stat_names,
)

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


def split_model(model_path: Path) -> tuple[bytes, bytes, Boundary, int]:
    """Extract the front and decoder subgraphs as serialized models.

    The decoder's instance norms are rewritten to take prior statistics (see ``norm_stats``); the last
    value is how many were found.
    """
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
    norms = find_norms(decoder.graph)
    add_prior_inputs(decoder, norms)
    return front.SerializeToString(), decoder.SerializeToString(), boundary, len(norms)


WindowCap = Callable[[], int | None]


@dataclass(frozen=True)
class WindowPlan:
    """Window sizes in aligned frames (25 ms each).

    Sized for 2 CPU cores, int8, where a decoder call costs ~35 ms plus ~9 ms per frame: each window must
    be decoded before the audio ahead of it has played, and every extra window costs the fixed part again.
    The defaults are for a voice whose decoder statistics are known; ``COLD_PLAN`` is for its first piece.
    """

    first: int = 12  # 0.3 s: first audio as early as possible
    second: int = 20  # decodes (with its context) well within the first window's 0.3 s of playback
    growth: float = 2.2  # later windows grow by this factor, keeping ahead of playback with ~15% to spare
    largest: int = 400  # up to 10 s
    # Frames of context on each side, computed and discarded. With the voice's statistics known (see
    # ``norm_stats``) the decoder's reach across a seam is short; two frames keep seams clean.
    context: int = 2
    lookahead: int = 2  # right context of the first window
    crossfade: int = 240  # samples (10 ms) blended at each seam

    def windows(self, frames: int) -> list[tuple[int, int]]:
        return list(self.iter_windows(frames))

    def iter_windows(self, frames: int, cap: WindowCap | None = None) -> Iterator[tuple[int, int]]:
        """Frame spans tiling ``0:frames``, decided one at a time.

        ``cap`` is asked before each window for the most frames it may hold right now (None: no limit): a
        server whose model worker is wanted by other listeners keeps every call short, because a call
        cannot be interrupted and the others' audio runs out while it lasts.
        """
        start, size, count = 0, self.first, 0
        while start < frames:
            limit = cap() if cap is not None else None
            n = size if limit is None else max(1, min(size, limit))
            end = min(frames, start + n)
            if frames - end < n // 2:  # fold a small tail into this window
                end = frames
            yield start, end
            start, count = end, count + 1
            size = self.second if count == 1 else min(self.largest, max(size + 1, int(size * self.growth)))


def crossfade(a: NDArray[np.float32], b: NDArray[np.float32], smooth: int = 8) -> NDArray[np.float32]:
    """Fade from ``a`` to ``b`` (two renditions of the same samples) without a dip in the high band.

    Below ~3 kHz the two windows agree, and a linear fade is exact. Above, their fine structure differs
    (different noise in each call), and a linear fade of partly uncorrelated signals loses up to half the
    power mid-way: an audible dulling at every seam. So the signals are split at a short moving average,
    the low band is faded linearly, and the high band's gains are scaled to keep its power, given how
    correlated the two high bands are.
    """
    n = len(a)
    if n == 0:
        return a
    kernel = np.ones(smooth, dtype=np.float32) / smooth
    low_a, low_b = np.convolve(a, kernel, "same"), np.convolve(b, kernel, "same")
    high_a, high_b = a - low_a, b - low_b
    t = np.linspace(0.0, 1.0, n, dtype=np.float32)
    power_a, power_b = float(np.dot(high_a, high_a)), float(np.dot(high_b, high_b))
    r = float(np.dot(high_a, high_b)) / np.sqrt(power_a * power_b) if power_a > 0 and power_b > 0 else 1.0
    r = min(1.0, max(0.0, r))
    norm = np.sqrt((1 - t) ** 2 + t**2 + 2 * r * t * (1 - t)).astype(np.float32)
    low = low_a * (1 - t) + low_b * t
    high = (high_a * (1 - t) + high_b * t) / norm
    return (low + high).astype(np.float32)


def window_prior(
    seen: NormStats | None,
    voice_prior: NormStats | None,
    frames: int,
    kept: int,
    computed: int,
    first: bool,
) -> tuple[NormStats | None, float]:
    """The statistics a window blends with its own, and their weight.

    Estimates the whole piece: the frames decoded so far count with their own statistics, the frames not
    decoded yet with the voice's (or, for a voice not heard yet, with those decoded so far); the window's
    ``computed`` frames count with their own. ``kept`` of them are new to the piece.
    """
    if first and voice_prior is not None:
        # The first window is mostly the model's leading silence and the onset: even a small share of its
        # own statistics lifts the noise floor (10x the whole piece's high-band energy there, measured),
        # so it takes the voice's statistics alone.
        return voice_prior, 1.0
    unseen = frames - (seen.frames if seen else 0.0) - kept
    guess = voice_prior if voice_prior is not None else seen
    rest = NormStats.merge(seen, guess.weighted(unseen) if guess is not None and unseen > 0 else None)
    return rest, (rest.frames / (rest.frames + computed) if rest is not None else 0.0)


class SplitKokoro:
    """Front + decoder sessions; yields audio window by window."""

    def __init__(self, model_path: Path, options: ort.SessionOptions, providers: list[str]) -> None:
        front, decoder, boundary, norms = split_model(model_path)
        if not norms:
            log.warning("no instance norms found in the decoder: every window uses its own statistics")
        self.boundary = boundary
        self.norms = norms
        self.front = ort.InferenceSession(front, sess_options=options, providers=providers)
        self.decoder = ort.InferenceSession(decoder, sess_options=options, providers=providers)
        self._front_outputs = [o.name for o in self.front.get_outputs()]
        self._decoder_outputs = [o.name for o in self.decoder.get_outputs()]
        self._none = np.zeros((1, 1, 1), dtype=np.float32)
        self._prior_names = [name for i in range(norms) for name in stat_names(i)[:2]]

    def features(self, feeds: dict[str, NDArray[Any]]) -> dict[str, NDArray[np.float32]]:
        outputs = self.front.run(self._front_outputs, feeds)
        return dict(zip(self._front_outputs, outputs, strict=True))

    def decode(
        self,
        feats: dict[str, NDArray[np.float32]],
        style: NDArray[np.float32],
        a: int,
        b: int,
        prior: NormStats | None = None,
        prior_weight: float = 0.0,
    ) -> tuple[NDArray[np.float32], NormStats]:
        """Frames ``a:b`` to audio, norms blending ``prior`` at ``prior_weight``; also the window's stats."""
        bd = self.boundary
        feeds: dict[str, NDArray[Any]] = {
            bd.asr: feats[bd.asr][:, :, a:b],
            bd.f0: feats[bd.f0][:, 2 * a : 2 * b],
            bd.noise: feats[bd.noise][:, 2 * a : 2 * b],
            bd.phase: feats[bd.phase][:, :, 2 * a : 2 * b],
            "style": style,
        }
        if self.norms:
            if prior is None:
                prior_weight = 0.0
                feeds.update({name: self._none for name in self._prior_names})
            else:
                for i in range(self.norms):
                    feeds[self._prior_names[2 * i]] = prior.means[i].astype(np.float32)
                    feeds[self._prior_names[2 * i + 1]] = prior.variances[i].astype(np.float32)
            feeds[BLEND_PRIOR] = np.array([prior_weight], dtype=np.float32)
            feeds[BLEND_WINDOW] = np.array([1.0 - prior_weight], dtype=np.float32)
        outputs = self.decoder.run(self._decoder_outputs, feeds)
        audio = np.asarray(outputs[0], dtype=np.float32).reshape(-1)
        return audio, NormStats.from_outputs(outputs[1:], float(b - a))

    def whole(
        self, feeds: dict[str, NDArray[Any]], style: NDArray[np.float32]
    ) -> tuple[NDArray[np.float32], NormStats]:
        """The whole piece in one decoder call (exactly the unsplit model's audio) and its statistics."""
        feats = self.features(feeds)
        return self.decode(feats, style, 0, int(feats[self.boundary.asr].shape[2]))

    def stream(
        self,
        feeds: dict[str, NDArray[Any]],
        style: NDArray[np.float32],
        plan: WindowPlan,
        voice_prior: NormStats | None = None,
        cold_plan: WindowPlan | None = None,
        remember: Callable[[NormStats], None] | None = None,
        cap: WindowCap | None = None,
    ) -> Iterator[NDArray[np.float32]]:
        """Audio window by window.

        Each window's norms use an estimate of the whole piece's statistics: its own frames, the frames
        decoded so far, and for the frames still to come the voice's statistics from earlier pieces (or,
        for a voice not heard yet, the frames decoded so far again). ``remember`` gets the piece's
        statistics once it is done, to become the voice's prior. Without a prior, ``cold_plan`` (more
        context) replaces ``plan``. ``cap`` limits window sizes as they are decided (``iter_windows``).
        """
        feats = self.features(feeds)
        frames = int(feats[self.boundary.asr].shape[2])
        if voice_prior is None or not self.norms:
            plan = cold_plan or COLD_PLAN
        ctx, xf = plan.context, plan.crossfade
        seen: NormStats | None = None  # statistics of the frames kept so far
        tail: NDArray[np.float32] | None = None  # end of the previous window, held back for the crossfade
        for start, end in plan.iter_windows(frames, cap):
            right = plan.lookahead if start == 0 else ctx
            lo, hi = max(0, start - ctx), min(frames, end + right)
            rest, weight = window_prior(seen, voice_prior, frames, end - start, hi - lo, first=start == 0)
            audio, window_stats = self.decode(feats, style, lo, hi, rest, weight)
            seen = NormStats.merge(seen, window_stats.weighted(float(end - start)))
            keep_from = (start - lo) * SAMPLES_PER_FRAME
            keep_to = (end - lo) * SAMPLES_PER_FRAME
            body = audio[keep_from:keep_to]
            if tail is not None:
                # Blend the held-back tail of the last window with this window's view of the same samples.
                body = np.concatenate([crossfade(tail, audio[keep_from - len(tail) : keep_from]), body])
            if end >= frames:
                if remember is not None and seen is not None and self.norms:
                    remember(seen)
                yield body
                return
            hold = min(xf, len(body), ctx * SAMPLES_PER_FRAME)  # the next window's left context covers it
            tail = body[len(body) - hold :].copy() if hold else None
            yield body[: len(body) - hold]  # one chunk per decoder call


# For a listener who already has audio buffered, first-audio latency no longer matters: no small windows at
# the start of the piece, so fewer calls (each costs ~35 ms fixed) and more of the CPU for other sessions.
THROUGHPUT_PLAN = WindowPlan(first=60, second=120, growth=2.0)

# A voice's first piece has no statistics to lean on: each window normalises with what has been decoded so
# far, which needs more context, and the first window looks further ahead (a window that is mostly the
# model's leading silence would otherwise have its noise floor normalised up). The extra context makes
# every window dearer, so windows grow more slowly to stay ahead of playback.
COLD_PLAN = WindowPlan(first=12, second=14, growth=1.8, context=6, lookahead=20)
