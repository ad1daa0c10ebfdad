"""How busy the model is, as the server measures it: listeners with work, the speed of full windows, the cost
of a window by its size, and the capacity in real-time listeners that follows from them.

Lanes report here (``lane_activity``, ``observe_decode``); admission and window sizing read from here.
Only windows decoded with nothing else running are measured (``alone``: no other model work, and no text
being planned): contended ones are slower, and counting them would make the capacity fall exactly when
the server is busy, or when one caller's text is slow to plan.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from streamvoice.engine.streaming.windows import FRAME_S, FRAMES_PER_SECOND
from streamvoice.server.core.admission import DecodeSpeed, measured_capacity
from streamvoice.server.core.window_sizing import WindowCost

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
