"""Kokoro as two ONNX Runtime sessions, front and decoder, decoding a piece window by window.

The front runs once per piece; the decoder then runs on the windows a ``WindowPlan`` decides, its norms
taking an estimate of the whole piece's statistics (``norm_stats``): made from the front's outputs before the
first window (``speech_estimate``), or blended from the voice's and each window's own.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray

from streamvoice.engine.graphs import Decoded, Decoding, Inputs, RunStop
from streamvoice.engine.options import session_providers
from streamvoice.engine.streaming import speech_estimate
from streamvoice.engine.streaming.decode_batcher import DecodeBatcher
from streamvoice.engine.streaming.speech_estimate import Reference, SpeechEstimator
from streamvoice.engine.streaming.windows import (
    COLD_PLAN,
    SAMPLES_PER_FRAME,
    WindowBlend,
    WindowCap,
    WindowPlan,
    crossfade,
    window_prior,
)
from streamvoice.engine.surgery import cuda_graph
from streamvoice.engine.surgery.graph_split import split_model
from streamvoice.engine.surgery.norm_stats import BLEND_PRIOR, BLEND_WINDOW, NormStats, stat_names
from streamvoice.engine.timing import decode_range

log = logging.getLogger("streamvoice.engine")


class SplitKokoro:
    """Front + decoder sessions: a piece whole or window by window (a ``graphs.Graph``)."""

    windows = True

    def __init__(self, model_path: Path, options: ort.SessionOptions, providers: list[str]) -> None:
        graphs = split_model(model_path)
        if not graphs.norms:
            log.warning("no instance norms found in the decoder: every window uses its own statistics")
        self.boundary = graphs.boundary
        self.norms = graphs.norms
        self.batchable = graphs.batchable
        self.batcher: DecodeBatcher | None = None
        # The fitted estimate of a piece's statistics for this model file (``speech_estimate``); None: the
        # windows blend the voice's statistics with their own.
        self.estimator: SpeechEstimator | None = None
        self._options, self._providers = options, providers
        self.front = ort.InferenceSession(
            graphs.front, sess_options=options, providers=session_providers(providers)
        )
        self.inputs = Inputs.of(self.front)
        decoder = (
            cuda_graph.for_cuda(graphs.decoder) if "CUDAExecutionProvider" in providers else graphs.decoder
        )
        self.decoder = ort.InferenceSession(
            decoder, sess_options=options, providers=session_providers(providers)
        )
        self._front_outputs = [o.name for o in self.front.get_outputs()]
        self._decoder_outputs = [o.name for o in self.decoder.get_outputs()]
        self._none = np.zeros((1, 1, 1), dtype=np.float32)
        self._prior_names = [name for i in range(self.norms) for name in stat_names(i)[:2]]
        self._weight_shape = (1, 1, 1) if self.batchable else (1,)  # one blend weight per row
        self._local = threading.local()  # the RunStop of the piece this worker thread decodes

    def replace_decoder(self, graph: bytes, disabled_optimizers: tuple[str, ...] = ()) -> None:
        """Decode with another graph of the same decoder (same inputs and outputs: see ``static_decoder``),
        without ONNX Runtime's ``disabled_optimizers`` (names of its graph transformers)."""
        decoder = ort.InferenceSession(
            graph, sess_options=self._options, providers=session_providers(self._providers),
            disabled_optimizers=list(disabled_optimizers) or None,
        )  # fmt: skip
        if [o.name for o in decoder.get_outputs()] != self._decoder_outputs:
            raise RuntimeError("the replacement decoder's outputs differ from the exported decoder's")
        self.decoder = decoder

    def replace_front(self, graph: bytes) -> None:
        """Run another graph of the same front (same inputs and outputs: see ``static_front``)."""
        front = ort.InferenceSession(
            graph, sess_options=self._options, providers=session_providers(self._providers)
        )
        if [o.name for o in front.get_outputs()] != self._front_outputs:
            raise RuntimeError("the replacement front's outputs differ from the exported front's")
        self.front = front

    def enable_batching(self, max_rows: int, linger_s: float, busy: Callable[[], int] | None) -> None:
        """Let concurrent windows of one size share decoder calls (see ``decode_batcher``)."""
        if not self.batchable:
            raise RuntimeError("this model's decoder graph could not be given a batch dimension")
        self.batcher = DecodeBatcher(self._run_decoder, max_rows, linger_s, busy)

    def _run_decoder(self, feeds: dict[str, NDArray[Any]]) -> list[NDArray[Any]]:
        return list(self.decoder.run(self._decoder_outputs, feeds, self._run_options()))

    def _run_options(self) -> ort.RunOptions | None:
        stop: RunStop | None = getattr(self._local, "stop", None)
        return stop.options if stop is not None else None

    @contextlib.contextmanager
    def interruptible(self, stop: RunStop) -> Iterator[None]:
        """Model runs on this thread, inside the block, end early when ``stop.stop()`` is called."""
        previous = getattr(self._local, "stop", None)
        self._local.stop = stop
        try:
            yield
        finally:
            self._local.stop = previous

    def decode_piece(
        self, feeds: dict[str, NDArray[Any]], style: NDArray[np.float32], how: Decoding
    ) -> Decoded:
        """The front once, then the piece's frames whole or window by window, as ``how`` says."""
        feats = self.features(feeds)
        durations = self.durations(feats)
        frames = self.frames(feats)
        if not how.windowed:
            audio, stats = self.whole(feats, style)
            # A whole piece's statistics include its silences; a voice's are its speech's (``calibrate``),
            # so only an export without durations learns from whole pieces.
            if how.remember is not None and durations is None and self.norms:
                how.remember(stats)
            return Decoded(iter([(audio, True)]), 0, frames, durations)
        span = (0, frames) if how.voiced is None else decode_range(durations, how.voiced, frames)
        chunks = self.stream(
            feats,
            style,
            how.plan,
            how.prior,
            how.cold_plan,
            how.remember,
            how.cap,
            span,
            how.silence if durations is not None else None,
            how.reference if durations is not None else None,
        )
        return Decoded(chunks, span[0], span[1] - span[0], durations)

    def features(self, feeds: dict[str, NDArray[Any]]) -> dict[str, NDArray[Any]]:
        outputs = self.front.run(self._front_outputs, feeds, self._run_options())
        return dict(zip(self._front_outputs, outputs, strict=True))

    def durations(self, feats: dict[str, NDArray[Any]]) -> NDArray[np.int64] | None:
        """Frames per token, pads included (None if this export does not show them)."""
        name = self.boundary.durations
        return None if name is None else np.asarray(feats[name], dtype=np.int64).reshape(-1)

    def frames(self, feats: dict[str, NDArray[Any]]) -> int:
        return int(feats[self.boundary.asr].shape[2])

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
        feeds = self.decoder_feeds(feats, style, a, b, prior, prior_weight)
        batcher = self.batcher
        outputs = self._run_decoder(feeds) if batcher is None else batcher.decode(feeds, b - a)
        audio = np.asarray(outputs[0], dtype=np.float32).reshape(-1)
        return audio, NormStats.from_outputs(outputs[1:], float(b - a))

    def piece_statistics(
        self, feeds: dict[str, NDArray[Any]], style: NDArray[np.float32], voiced: tuple[int, int]
    ) -> tuple[NormStats, NormStats | None, Reference | None]:
        """A piece decoded cold: its norms' statistics over the speech (``voiced`` tokens) and over the
        model's leading silence (None when it has none), each decoded alone; and, with an ``estimator``, the
        piece as a reference for it (decoded whole: statistics and frame summaries of every frame)."""
        feats = self.features(feeds)
        first, last = decode_range(self.durations(feats), voiced, self.frames(feats))
        speech = self.decode(feats, style, first, last)[1]
        silence = self.decode(feats, style, 0, first)[1] if first > 0 else None
        reference = None
        if self.estimator is not None:
            reference = Reference(self.whole(feats, style)[1], self.estimator.summaries(*self.tracks(feats)))
        return speech, silence, reference

    def tracks(
        self, feats: dict[str, NDArray[Any]], span: tuple[int, int] | None = None
    ) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any]]:
        """The front's outputs over the frames ``span`` (default all): aligned text features [C, T], pitch
        and energy [2T]."""
        bd, (a, b) = self.boundary, span or (0, self.frames(feats))
        return feats[bd.asr][0, :, a:b], feats[bd.f0][0, 2 * a : 2 * b], feats[bd.noise][0, 2 * a : 2 * b]

    def estimate(self, feats: dict[str, NDArray[Any]], reference: Reference) -> NormStats | None:
        """The whole piece's statistics, silences and all, before any of it is decoded, from the frame
        summaries of all its frames (None without an estimator)."""
        if self.estimator is None:
            return None
        tracks = self.tracks(feats)
        estimate = self.estimator.estimate(
            reference, self.estimator.summaries(*tracks), float(self.frames(feats))
        )
        return speech_estimate.with_text_statistics(estimate, tracks[0])

    def window_feeds(
        self,
        feeds: dict[str, NDArray[Any]],
        style: NDArray[np.float32],
        prior: NormStats | None,
        frames: int,
        context: int,
    ) -> list[dict[str, NDArray[Any]]]:
        """The decoder's feeds for every full window of a piece (``frames`` kept, ``context`` each side)."""
        feats = self.features(feeds)
        starts = range(0, self.frames(feats) - frames - 2 * context + 1, frames)
        return [self.decoder_feeds(feats, style, a, a + frames + 2 * context, prior, 0.5) for a in starts]

    def decoder_feeds(
        self,
        feats: dict[str, NDArray[np.float32]],
        style: NDArray[np.float32],
        a: int,
        b: int,
        prior: NormStats | None = None,
        prior_weight: float = 0.0,
    ) -> dict[str, NDArray[Any]]:
        """The decoder's inputs for frames ``a:b`` (public so that a benchmark can time the same call)."""
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
            feeds[BLEND_PRIOR] = np.full(self._weight_shape, prior_weight, dtype=np.float32)
            feeds[BLEND_WINDOW] = np.full(self._weight_shape, 1.0 - prior_weight, dtype=np.float32)
        return feeds

    def whole(
        self, feats: dict[str, NDArray[Any]], style: NDArray[np.float32]
    ) -> tuple[NDArray[np.float32], NormStats]:
        """The whole piece in one decoder call (exactly the unsplit model's audio) and its statistics."""
        return self.decode(feats, style, 0, self.frames(feats))

    def stream(
        self,
        feats: dict[str, NDArray[Any]],
        style: NDArray[np.float32],
        plan: WindowPlan,
        voice_prior: NormStats | None = None,
        cold_plan: WindowPlan | None = None,
        remember: Callable[[NormStats], None] | None = None,
        cap: WindowCap | None = None,
        span: tuple[int, int] | None = None,
        silence: NormStats | None = None,
        reference: Reference | None = None,
    ) -> Iterator[tuple[NDArray[np.float32], bool]]:
        """Audio window by window, each with whether it is the last; frames ``span`` only (default all).

        Each window's norms use an estimate of the whole piece's statistics: its own frames, the frames
        decoded so far, and for the frames still to come the voice's statistics from earlier pieces (or,
        for a voice not heard yet, the frames decoded so far again). ``remember`` gets the piece's
        statistics once it is done, to become the voice's prior. Without a prior, ``cold_plan`` (more
        context) replaces ``plan``. ``cap`` limits window sizes as they are decided (``iter_windows``).

        With an ``estimator`` and the voice's ``reference``, every window instead normalises with one fixed
        estimate of the piece's statistics made before the first (``speech_estimate``), blended with its own
        by the voice's ``share``, its audio scaled by the voice's ``gain``: what the
        listener hears against the whole piece is ``python -m streamvoice.bench.quality``'s
        (docs/benchmarks.md 7)."""
        frames = self.frames(feats)
        first, last = span or (0, frames)
        estimate = self.estimate(feats, reference) if reference and self.norms else None
        share, gain = (reference.share, reference.gain) if reference is not None else (0.0, 1.0)
        blend: WindowBlend
        if estimate is not None:
            remember = None  # the voice's statistics stay its reference's
            blend = lambda lo, hi, start, end, seen: (estimate, share)  # noqa: E731
        else:
            if voice_prior is None or not self.norms:
                plan = cold_plan or COLD_PLAN
            silent = frames - (last - first)
            blend = lambda lo, hi, start, end, seen: window_prior(  # noqa: E731
                seen, voice_prior, frames, end - start, hi - lo, start == 0, silence, silent
            )
        scale = gain if estimate is not None else 1.0  # the voice's loudness at its share, taken out
        for audio, done, seen in self.decode_windows(feats, style, plan, blend, (first, last), cap, scale):
            if done and remember is not None and seen is not None and self.norms:
                remember(seen)
            yield audio, done

    def decode_windows(
        self,
        feats: dict[str, NDArray[Any]],
        style: NDArray[np.float32],
        plan: WindowPlan,
        blend: WindowBlend,
        span: tuple[int, int],
        cap: WindowCap | None = None,
        gain: float = 1.0,
    ) -> Iterator[tuple[NDArray[np.float32], bool, NormStats | None]]:
        """Frames ``span`` in ``plan``'s windows, each normalised with what ``blend`` says, joined: one chunk
        per decoder call, whether it is the last, and the statistics of the frames kept so far. The one window
        loop: ``stream`` runs it with the engine's statistics, ``bench.stream_breakdown`` with others."""
        frames = self.frames(feats)
        first, last = span
        seen: NormStats | None = None  # statistics of the frames kept so far
        tail: NDArray[np.float32] | None = None  # end of the previous window, held back for the crossfade
        for offset_start, offset_end in plan.iter_windows(last - first, cap):
            start, end = first + offset_start, first + offset_end
            left, right = plan.margins(offset_start, offset_end)
            lo, hi = max(0, start - left), min(frames, end + right)
            audio, window_stats = self.decode(feats, style, lo, hi, *blend(lo, hi, start, end, seen))
            if gain != 1.0:
                audio = audio * np.float32(gain)
            seen = NormStats.merge(seen, window_stats.weighted(float(end - start)))
            keep_from = (start - lo) * SAMPLES_PER_FRAME
            keep_to = (end - lo) * SAMPLES_PER_FRAME
            body = audio[keep_from:keep_to]
            if tail is not None:
                # Blend the held-back tail of the last window with this window's view of the same samples.
                body = np.concatenate([crossfade(tail, audio[keep_from - len(tail) : keep_from]), body])
            if end >= last:
                yield body, True, seen
                return
            # Held back for the crossfade, within what the next window's left context covers.
            hold = min(plan.crossfade, len(body), plan.context * SAMPLES_PER_FRAME)
            tail = body[len(body) - hold :].copy() if hold else None
            yield body[: len(body) - hold], False, seen  # one chunk per decoder call
