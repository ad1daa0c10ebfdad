"""How busy the model is, as the server measures it: listeners with work, the speed of full windows, the cost
of a window by its size, and the capacity in real-time listeners that follows from them.

Lanes report here (``lane_activity``, ``observe_decode``); admission and window sizing read from here.
Only windows decoded with nothing else running are measured (``alone``: no other model work, and no text
being planned): contended ones are slower, and counting them would make the capacity fall exactly when
the server is busy, or when one caller's text is slow to plan.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

from streamvoice.engine.streaming.windows import FRAME_S, FRAMES_PER_SECOND
from streamvoice.server.core.window_sizing import WindowCost

# Seconds of audio over which the decoding speed is averaged: long enough that one slow window (a cold
# voice, a tiny window under contention) does not swing the capacity, short enough to follow the machine.
SPEED_HORIZON_S = 30.0

# Share of the workers' time the admitted listeners' decoding may take: the rest is for planning, the event
# loop and a machine that drifts slower than it measured.
SUSTAINED_SHARE = 0.85
# What each listener costs beyond its full windows, in seconds of work per second of its audio: every piece
# runs the front (~40 ms on 2 cores) and decodes a small first and last window (~40 ms more than full
# windows would), a piece every ~2 s of speech. Measured by its absence (``python -m
# streamvoice.bench.capacity --ks 1,2,3,4 --options default``, 2026-12-04, AMD EPYC, 2 cores): at 0.197 s of
# work per second of audio, counting full windows alone admitted 4, and the slowdown watch then shed two of
# them (an 11 ms stall); 3 at 0.235 and 2 at 0.35-0.38 (Intel Xeon, ten runs) were all kept fed.
PIECE_OVERHEAD_RTF = 0.04


def measured_capacity(
    workers: int, decode_rtf: float, share: float = SUSTAINED_SHARE, overhead: float = PIECE_OVERHEAD_RTF
) -> int:
    """Real-time listeners whose decoding, ``decode_rtf`` seconds of work per second of audio in full windows
    plus ``overhead`` for their pieces' starts, fits in ``share`` of ``workers``' time; never fewer than one
    (a slow machine still serves someone)."""
    if decode_rtf <= 0:
        return workers
    return max(1, math.floor(share * workers / (decode_rtf + overhead) + 1e-9))


class DecodeSpeed:
    """Seconds of work per second of audio, averaged over the last ~``horizon_s`` of audio decoded."""

    def __init__(self, initial_rtf: float = 0.5, horizon_s: float = SPEED_HORIZON_S) -> None:
        self.horizon_s = horizon_s
        self._work = initial_rtf * 1.0  # as if one second of audio had been seen
        self._audio = 1.0

    @property
    def rtf(self) -> float:
        return self._work / self._audio

    def observe(self, seconds: float, audio_s: float) -> None:
        if audio_s <= 0:
            return
        decay = math.exp(-audio_s / self.horizon_s)
        self._work = self._work * decay + seconds
        self._audio = self._audio * decay + audio_s

    def reset(self, rtf: float) -> None:
        self._work, self._audio = rtf, 1.0


STEADY_WINDOW_S = 0.75  # windows at least this long (the full size is 1 s) measure the machine's speed
# The pace follows the last few windows: weight of the newest (a slowdown shows in one or two windows, ~1 s).
PACE_WEIGHT = 0.5
PACE_BOUNDS = (0.25, 8.0)  # one window's ratio is clipped: a pause of the whole process is not a speed
INITIAL_RTF = 0.5  # seconds of work per second of audio assumed before the warm-up measures it


@dataclass(frozen=True)
class DecodedWindow:
    """A window as its lane delivered it, for whoever watches the load (``bench.capacity --trace``)."""

    at: float  # monotonic time it was delivered
    lane: int  # which listener's lane (an id, stable for the lane's life)
    frames: float
    work_s: float
    buffered_s: float  # audio its listener had buffered when it started
    piece_start: bool  # the piece's first window (the front model ran in it)
    active: int  # listeners with work at the time


class Load:
    def __init__(self, workers: int, configured_listeners: int = 0, rtf: float = INITIAL_RTF) -> None:
        self.workers = workers
        self.configured_listeners = configured_listeners  # 0: measured
        # Both start pessimistic and follow the machine: the speed of full-size windows (what admission
        # sizes with) and the cost of a window by its size (what windows are sized with).
        self.decode_speed = DecodeSpeed(rtf)
        self.window_cost = WindowCost(rtf)
        # Told of every window a lane delivers (none by default: nothing is built for nobody).
        self.window_watchers: list[Callable[[DecodedWindow], None]] = []
        # Chunks being planned (or waiting for the planning thread) right now. Planning shares the CPU with
        # decoding, so a window decoded meanwhile is not the machine's own speed either.
        self.planning = 0
        # How much slower than its measure the machine decodes now: the last windows' cost over what the
        # window-cost fit predicts for their size (1.0: as measured; 2.0: half the speed). Every window
        # counts, contended or not, where one worker decodes: a neighbour's load, or text being planned, is
        # exactly what makes the machine slower than its measure (``watch`` reads it).
        self.pace = 1.0
        self._active_lanes = 0
        self._lock = threading.Lock()

    def capacity(self) -> int:
        """Real-time listeners this server keeps fed: configured, or measured from the decoding speed."""
        return self.configured_listeners or measured_capacity(self.workers, self.decode_speed.rtf)

    @property
    def active_lanes(self) -> int:
        """Listeners with work to decode right now."""
        return self._active_lanes

    @property
    def overloaded(self) -> bool:
        """At least two more listeners have work to decode than the server keeps fed: windows then go for
        throughput (``window_sizing``). One beyond is not enough: the capacity is an estimate, and a server
        wrongly in this state stalls listeners it could keep fed on long windows, while wrongly out of it,
        it only stays as it was."""
        return self._active_lanes > self.capacity() + 1

    def lane_activity(self, delta: int) -> None:
        with self._lock:
            self._active_lanes += delta

    def calibrate(self, rtf: float) -> None:
        """A fresh measure of full windows timed alone (the warm-up's): both estimates start again from it."""
        self.decode_speed.reset(rtf)
        self.window_cost.reset(rtf)

    def feedable(self) -> float:
        """Real-time listeners the machine keeps fed at its present pace on full (one-second) windows, every
        worker busy, no headroom: the window-cost fit times the pace is what the last windows cost."""
        return self.workers / max(self.window_cost.seconds(FRAMES_PER_SECOND) * self.pace, 1e-6)

    def observe_decode(self, seconds: float, audio_s: float, alone: bool = False) -> None:
        """A window of a piece, neither its first (which runs the front model, a cost of the piece) nor its
        last (which decodes the trimmed tail). Only full-size windows count for the capacity: small ones
        cost ~2x per second of audio, and mixing them in would put the estimate between two counts."""
        if audio_s > 0 and seconds > 0 and (alone or self.workers == 1):
            ratio = min(
                max(seconds / self.window_cost.seconds(audio_s / FRAME_S), PACE_BOUNDS[0]), PACE_BOUNDS[1]
            )
            self.pace += PACE_WEIGHT * (ratio - self.pace)
        if alone and audio_s > 0:
            self.window_cost.observe(audio_s / FRAME_S, seconds)
            if audio_s >= STEADY_WINDOW_S:
                self.decode_speed.observe(seconds, audio_s)

    def tell(self, window: DecodedWindow) -> None:
        for watcher in self.window_watchers:
            watcher(window)


COST_HALF_LIFE_S = 2.0  # how fast a lane's recent cost forgets: a slowdown is judged within seconds


class RecentCost:
    """Model seconds a lane's work took, decaying with ``COST_HALF_LIFE_S``: its share of the model worker
    lately, whatever its text (a chain of digits is many small pieces, each with a front call, and costs
    several times the model time of ordinary speech per second of audio). Written by the model worker,
    read by the watch on the event loop (a float each)."""

    def __init__(self) -> None:
        self._value = 0.0
        self._at = 0.0

    def add(self, seconds: float, now: float) -> None:
        self._value = self.at(now) + seconds
        self._at = now

    def at(self, now: float) -> float:
        decay: float = 0.5 ** (max(0.0, now - self._at) / COST_HALF_LIFE_S)
        return self._value * decay
