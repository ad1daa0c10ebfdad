"""Windowed decoding plans: which frames each decoder call covers, and how neighbouring windows are joined.

The decoder runs on overlapping frame windows (a small first window for early audio, larger ones after for
throughput), each with context on both sides that is computed and thrown away; neighbouring windows are
crossfaded over a few milliseconds. Each window normalises with an estimate of the whole piece's
statistics, so little context is needed: the piece's own, estimated before the first window
(``speech_estimate``), or for a model file without that fit, the voice's blended with each window's own
(``window_prior``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamvoice.engine.surgery.norm_stats import NormStats
from streamvoice.protocol import SAMPLE_RATE

SAMPLES_PER_FRAME = 600  # the model's duration unit: 40 aligned frames per second of its 24 kHz audio
FRAME_S = SAMPLES_PER_FRAME / SAMPLE_RATE  # 25 ms
FRAMES_PER_SECOND = SAMPLE_RATE // SAMPLES_PER_FRAME


WindowCap = Callable[[], int | None]
# What a window decoding frames ``lo:hi`` (keeping ``start:end``) blends with its own statistics, and at what
# weight, given the statistics of the frames kept so far (None before the first): (lo, hi, start, end, seen).
WindowBlend = Callable[[int, int, int, int, NormStats | None], tuple[NormStats | None, float]]


@dataclass(frozen=True)
class WindowPlan:
    """Window sizes in aligned frames (25 ms each).

    Sized for 2 CPU cores, int8, where a decoder call costs a fixed part plus a part per frame (both measured
    by `python -m streamvoice.bench.profile`, table in docs/benchmarks.md): each window must
    be decoded before the audio ahead of it has played, and every extra window costs the fixed part again.
    The defaults are for a voice whose decoder statistics are known; ``COLD_PLAN`` is for its first piece.
    """

    first: int = 10  # 0.25 s: first audio as early as possible
    second: int = 16  # decodes (with its context) about as fast as the first window plays
    growth: float = 2.2  # later windows grow by this factor, keeping ahead of playback with ~15% to spare
    largest: int = 400  # up to 10 s
    # Frames of context on each side, computed and discarded. A trimmed piece's windows are all speech,
    # and short pieces ("Sure thing.") drift from the whole-piece audio with too little context; each extra
    # frame costs every window its decoding time. Four is the measured balance on 2 cores (PESQ against the
    # whole piece ~2.8 vs ~2.5 with two; with six in every window, later windows fell behind playback when
    # that was measured): the plans compared are in docs/benchmarks.md (python -m streamvoice.bench.quality
    # and .listener).
    context: int = 4
    # A window of ``wide_from`` frames or more takes ``wide_context`` instead: two frames more a side cost it
    # under 10% of its decoding, and mend a word the stream lost at its start (ff_siwis's "au marché" heard
    # "marcher" at 4, word for word at 6; streamed-vs-whole PESQ +0.02 and DNSMOS drop 0.035 to 0.023 over 52
    # held-out pieces in 8 voices: python -m streamvoice.bench.quality --later-windows, docs/benchmarks.md 7d).
    # From 16 frames, so the second window takes it too: on an AMD EPYC, whose int8 kernels round otherwise,
    # "au" sits on the second seam's edge and was heard "marcher" again with 4 there (tests/test_streaming_engine.py;
    # docs/benchmarks.md 7e). A loaded server's capped windows stay under 16 and keep ``context``.
    wide_context: int = 6
    wide_from: int = 16
    # Right context of the first window: its end is crossfaded with the second window's view of the same
    # samples, so two frames are enough (streamed-vs-whole PESQ 2.16 with 2 or 4, 2.15 with 1, 2.11 with 0:
    # six voices x six sentences, ``python -m streamvoice.bench.quality --first-window``, docs/benchmarks.md
    # 10c); each frame costs heard onset ~4 ms on 2 cores. Two frames fewer of left context cost PESQ 0.04.
    lookahead: int = 2
    lead_context: int = 4  # left context of the first window (the model's silence before the speech)
    crossfade: int = 240  # samples (10 ms) blended at each seam

    def margins(self, start: int, end: int) -> tuple[int, int]:
        """Frames of context computed and thrown away left and right of the window ``start:end`` (offsets
        into the decoded span): the first window's own, then ``context``, or ``wide_context`` for a window
        of ``wide_from`` frames or more."""
        if start == 0:
            return self.lead_context, self.lookahead
        side = self.wide_context if end - start >= self.wide_from else self.context
        return side, side

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
            if frames - end < n // 2:  # a small tail would be left
                if limit is None or frames - start <= limit:
                    end = frames  # fold it into this window
                else:
                    # Folded, a capped window would grow by up to half again past its cap, and the cap is
                    # another listener's deadline: the rest goes in two halves, each within the cap.
                    end = start + (frames - start + 1) // 2
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
    silence: NormStats | None = None,
    silent: int = 0,
) -> tuple[NormStats | None, float]:
    """The statistics a window blends with its own, and their weight.

    Estimates the whole piece: the frames decoded so far count with their own statistics, the speech not
    decoded yet with the voice's (or, for a voice not heard yet, with those decoded so far), the ``silent``
    frames around the speech that are never decoded with the voice's ``silence``; the window's
    ``computed`` frames count with their own. ``kept`` of them are new to the piece.
    """
    if silence is None:
        silent = 0  # no silence statistics: those frames count as speech still to come
    if first and voice_prior is not None and not silent:
        # The first window is mostly the model's leading silence and the onset: even a small share of its
        # own statistics lifts the noise floor (10x the whole piece's high-band energy there, measured),
        # so it takes the voice's statistics alone.
        return voice_prior, 1.0
    unseen = frames - silent - (seen.frames if seen else 0.0) - kept
    guess = voice_prior if voice_prior is not None else seen
    rest = NormStats.merge(seen, guess.weighted(unseen) if guess is not None and unseen > 0 else None)
    if silence is not None and silent > 0:
        rest = NormStats.merge(rest, silence.weighted(float(silent)))
    return rest, (rest.frames / (rest.frames + computed) if rest is not None else 0.0)


# For a listener who already has audio buffered, first-audio latency no longer matters: no small windows at
# the start of the piece, so fewer calls (each pays the fixed part again) and more of the CPU for others.
THROUGHPUT_PLAN = WindowPlan(first=60, second=120, growth=2.0)

# A voice's first piece has no statistics to lean on: each window normalises with what has been decoded so
# far, which needs more context, and the first window looks further ahead (a window that is mostly the
# model's leading silence would otherwise have its noise floor normalised up). The extra context makes
# every window dearer, so windows grow more slowly to stay ahead of playback.
COLD_PLAN = WindowPlan(first=12, second=14, growth=1.8, context=6, lookahead=20, lead_context=6)
