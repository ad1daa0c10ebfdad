"""What one decoder window costs on this machine: a fixed part per call plus a part per frame, learned
while the server runs, and the smallest window that keeps a number of listeners fed.

A window's cost is not proportional to its audio. Every call pays a fixed part (the call itself, the style
projections, and the context frames on both sides that are decoded and thrown away), so on 2 cores a
12-frame window costs ~1.6x per second of audio what a 40-frame window does. The deadline policy shrinks
windows so that a waiting listener is served before it runs out; but when the listeners with work are
already behind, every window is shrunk, the machine makes less audio than they play, nobody catches up,
and it stays that way. Measured before this floor: two listeners this machine keeps fed stalled 6 to 8 s
in two runs of three, nearly every window 12 frames (``python -m streamvoice.bench.capacity --ks 2``).
So when the listener waiting and the one being decoded are both out of audio, windows do not shrink below
the size at which the listeners with work are sustainable (``lane``; a listener with audio to spare still
shrinks its window for one that is due).
"""

from __future__ import annotations

import math

FRAME_S = 0.025  # seconds of audio per decoder frame
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
