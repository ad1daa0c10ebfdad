"""How large a listener's next decoder window is: the cost model, the budgets, and the rule over them.

A window's cost is not proportional to its audio: every call pays a fixed part (the call, the style
projections, the context frames decoded and thrown away on both sides) plus a part per frame, so on 2 cores
a 12-frame window costs ~1.6x per second of audio what a 40-frame window does. ``WindowCost`` learns both
parts while the server runs; ``window_frames`` sizes a window from two budgets (its own listener's buffered
audio, and the audio of the listener waiting next); ``window_cap`` is what the lane asks before each window.
The reasoning behind each bound, and the traces that set it: docs/architecture.md#window-sizing.
Checked by ``pytest tests/test_window_sizing.py`` and, end to end, ``python -m streamvoice.bench.capacity``.
"""

from __future__ import annotations

import math

from streamvoice.engine.streaming.windows import FRAME_S

SMALLEST_WINDOW_FRAMES = 12
LARGEST_WINDOW_FRAMES = 40  # 1 s of audio; a newcomer's first window may wait for one
# Each budget is divided by this: the 99th percentile of a window's measured cost over its fitted cost.
COST_SPREAD = 1.2
# Past capacity (two or more listeners with work beyond what the server keeps fed) every listener falls
# behind whatever the window size, and short windows make less audio per second of work: size for
# throughput. The test is a count of listeners, never a symptom such as a late turn, so that the state ends
# when the load does.
PAST_CAPACITY_WINDOW_FRAMES = 120
# With decoder batching, capped windows take one of a few sizes so that different listeners' windows meet
# in one call (a batch holds windows of one size).
BATCH_BUCKETS = (SMALLEST_WINDOW_FRAMES, 16, 24, 32, LARGEST_WINDOW_FRAMES)

# Share of the machine the listeners with work may take at the smallest window the floor allows: the rest
# is the margin for the front model, planning, and the noise of a shared machine.
SUSTAINABLE_LOAD = 0.85
# The fit follows the last ~this many uncontended windows (a slow spell or a warmer cache moves it).
HORIZON_WINDOWS = 64
# Before any window is seen: a fixed part of this share of a 40-frame window's cost (0.24 measured on
# 2 cores, int8; ``python -m streamvoice.bench.batching`` prints costs by window size).
PRIOR_FIXED_SHARE = 0.25
PRIOR_FRAMES = 40
MIN_FIT_WINDOWS = 8.0  # windows' worth of weight before the fit replaces the prior's split
MIN_SPREAD_FRAMES = 4.0  # windows of (nearly) one size cannot separate the fixed part from the rest


def sustainable_frames(fixed_s: float, per_frame_s: float, listeners: int, load: float) -> float | None:
    """The smallest window (frames) at which ``listeners`` listeners, each decoded one window per its
    duration, take at most ``load`` of one worker: n (fixed + p W) <= load W F. None when no size does."""
    if listeners <= 0:
        return 0.0
    room = load * FRAME_S - listeners * per_frame_s
    if room <= 0:
        return None
    return listeners * fixed_s / room


class WindowCost:
    """cost(frames) = fixed_s + per_frame_s * frames: a least-squares fit over recent uncontended windows,
    exponentially weighted, starting from a prior built from one measured speed."""

    def __init__(self, rtf: float, horizon: int = HORIZON_WINDOWS) -> None:
        self._decay = math.exp(-1.0 / horizon)
        self.reset(rtf)

    def reset(self, rtf: float) -> None:
        """Start again from ``rtf`` seconds of work per second of audio (for windows of 40 frames)."""
        self.fixed_s = PRIOR_FIXED_SHARE * rtf * PRIOR_FRAMES * FRAME_S
        self.per_frame_s = (1 - PRIOR_FIXED_SHARE) * rtf * FRAME_S
        self._w = self._x = self._y = self._xx = self._xy = 0.0

    def observe(self, frames: float, seconds: float) -> None:
        """One window decoded with nothing else running: ``frames`` of audio kept, in ``seconds``."""
        if frames <= 0 or seconds <= 0:
            return
        d = self._decay
        self._w = self._w * d + 1.0
        self._x = self._x * d + frames
        self._y = self._y * d + seconds
        self._xx = self._xx * d + frames * frames
        self._xy = self._xy * d + frames * seconds
        mean_x, mean_y = self._x / self._w, self._y / self._w
        spread = self._xx / self._w - mean_x * mean_x
        if self._w < MIN_FIT_WINDOWS or spread < MIN_SPREAD_FRAMES**2:
            # Too few windows, or of (nearly) one size: keep the split between the fixed part and the
            # rest, and follow the level.
            scale = mean_y / self.seconds(mean_x)
            self.fixed_s *= scale
            self.per_frame_s *= scale
            return
        slope = (self._xy / self._w - mean_x * mean_y) / spread
        intercept = mean_y - slope * mean_x
        if slope > 0 and intercept >= 0:  # noise can give an impossible fit: keep the last sensible one
            self.fixed_s, self.per_frame_s = intercept, slope

    def seconds(self, frames: float) -> float:
        return self.fixed_s + self.per_frame_s * frames

    def frames_within(self, seconds: float) -> int:
        """The largest window decoded within ``seconds`` (0 when not even the fixed part fits)."""
        return max(0, int((seconds - self.fixed_s) / self.per_frame_s))

    def floor_frames(self, listeners: int, load: float = SUSTAINABLE_LOAD) -> float | None:
        """The smallest window that keeps ``listeners`` sustainable (None: no size does)."""
        return sustainable_frames(self.fixed_s, self.per_frame_s, listeners, load)


def window_frames(cost: WindowCost, own_s: float, waiting_s: float | None, floor: float | None) -> int:
    """The next window's size: what fits in this listener's buffered audio (``own_s``) and, when another
    listener waits, in its buffer less its own smallest window (``waiting_s``: seconds until it runs out),
    each with ``COST_SPREAD`` to spare, up to ``LARGEST_WINDOW_FRAMES``.

    While the listener waiting is short of audio too (less than a full window's decoding), no smaller than
    the sustainable ``floor`` (None: no size is sustainable, so the largest): windows sized to two short
    budgets cost more per second of audio than the pair plays, and both would only fall further behind.
    While the other has audio to spare, it pays for this listener's small windows (a newcomer, a piece's
    start), and the listener's own budget decides."""
    budget = own_s
    if waiting_s is not None:
        budget = min(budget, waiting_s - COST_SPREAD * cost.seconds(SMALLEST_WINDOW_FRAMES))
    lowest = SMALLEST_WINDOW_FRAMES
    if waiting_s is not None and waiting_s < COST_SPREAD * cost.seconds(LARGEST_WINDOW_FRAMES):
        lowest = max(lowest, math.ceil(floor) if floor is not None else LARGEST_WINDOW_FRAMES)
    return min(LARGEST_WINDOW_FRAMES, max(lowest, cost.frames_within(budget / COST_SPREAD)))


def batch_bucket(frames: int) -> int:
    """The largest bucket that fits ``frames`` (the smallest bucket when none does)."""
    return max((b for b in BATCH_BUCKETS if b <= frames), default=BATCH_BUCKETS[0])


def window_cap(
    cost: WindowCost,
    own_s: float,
    waiting_s: float | None,
    listeners: int,
    overloaded: bool,
    batched: bool,
) -> int:
    """The lane's next window: ``own_s`` of its listener's audio buffered, the next waiting job due in
    ``waiting_s`` (None: nothing waits), ``listeners`` with work, past capacity or not."""
    if overloaded:
        return PAST_CAPACITY_WINDOW_FRAMES
    frames = window_frames(cost, own_s, waiting_s, cost.floor_frames(listeners))
    return batch_bucket(frames) if batched else frames
