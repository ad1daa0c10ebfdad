"""A listener's lane: its synthesis work in speaking order, one scheduler job at a time, window by window.

The lane is what the deadline scheduler schedules: each turn decodes one window and hands the worker back
with the deadline of the next one (when this listener would run out of audio).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from streamvoice.engine.planning import Piece
from streamvoice.engine.split_kokoro import RunStop
from streamvoice.engine.timing import pause_samples
from streamvoice.engine.windows import SAMPLES_PER_FRAME, THROUGHPUT_PLAN
from streamvoice.protocol import MAX_SPEED, MIN_SPEED
from streamvoice.server.piece_audio import PieceAudio
from streamvoice.server.scheduler import Requeue

if TYPE_CHECKING:
    from streamvoice.server.service import ResolvedRequest, SpeechService
    from streamvoice.server.window_cost import WindowCost


@dataclass
class _Work:
    piece: Piece
    request: ResolvedRequest
    sink: PieceAudio
    windows: Generator[NDArray[np.float32]] | None = None
    samples: int = 0
    busy_s: float = 0.0
    # The last window's (seconds of work, seconds of audio, alone), observed once the next one comes: a
    # piece's last window decodes its trailing context and the frames trimmed after the speech, so its
    # kept audio says little about its cost (a 15-frame tail took as long as a 40-frame window).
    pending: tuple[float, float, bool] | None = None
    stop: RunStop = field(default_factory=RunStop)  # ends its model run in flight when it is abandoned


# A listener with this much audio still to play gets throughput-sized windows for its next piece.
BUFFERED_ENOUGH_S = 1.5
# A window's size is decided when it starts, from two budgets: it must end before this listener's own audio
# runs out (a piece's second window once took 16 frames' decoding, 0.18-0.22 s, after a first window of
# 0.185 s of audio: a 10-35 ms gap in the middle of a word, traced in ``bench.capacity --trace``), and,
# while another listener waits, early enough that that listener's smallest window still ends before its
# audio does. Each budget is divided by ``COST_SPREAD``: the 99th percentile of a window's measured cost over
# the fitted one (1.22 in the same trace). Within those budgets a window is as large as it may be, up to 40
# frames (1 s of audio, ~0.35 s of decoding on 2 cores): a newcomer's first window waits for it.
#
# While the listener waiting is short of audio too, never below the size at which the listeners with work
# are sustainable (see ``window_cost``): smaller windows cost more per second of audio. With two listeners
# sizes under ~14 frames make less audio than they play, and sizes under the floor (~19-31 frames on 2
# cores) leave nothing for piece starts; when both were short, windows sized to their short budgets
# shrank their buffers together, the budgets shrank the windows further, and the pair could not climb
# back (the state once called bistable). While the other listener has audio to spare, the floor would
# only turn this listener's small window into a gap, and the other's spare pays for it.
SMALLEST_WINDOW_FRAMES = 12
LARGEST_WINDOW_FRAMES = 40
COST_SPREAD = 1.2
FIFO_SHARED_WINDOW_FRAMES = 24  # FIFO knows no deadlines: a fixed size while others wait
# Past capacity (two or more listeners with work beyond what the server keeps fed), short windows save
# nobody: every listener falls behind anyway, and each short window costs its fixed part and its context
# again, so the machine makes less audio exactly when it is short of it (at saturation, 0.6 of the
# single-call limit with short windows). Then windows and piece plans are sized for throughput. The test
# is a count, not a symptom (a late turn), on purpose: long windows make turns late, so a symptom would keep
# the server in this state after the load had gone. Admission (on by default) keeps admitted listeners out
# of it.
PAST_CAPACITY_WINDOW_FRAMES = 120
# Decoded audio a listener has not taken yet (unsent) beyond which its lane stops decoding until the sender
# catches up: what a slow or stalled reader can make the server hold is bounded per listener.
MAX_UNSENT_S = 6.0
RESUME_UNSENT_S = 3.0


# With decoder batching, capped windows take one of a few sizes, so that different listeners' windows meet
# in one call (a batch holds windows of one size).
BATCH_BUCKETS = (SMALLEST_WINDOW_FRAMES, 16, 24, 32, LARGEST_WINDOW_FRAMES)


def window_frames(cost: WindowCost, own_s: float, waiting_s: float | None, floor: float | None) -> int:
    """The next window's size: what fits in this listener's buffered audio (``own_s``) and, when another
    listener waits, in its buffer less its own smallest window (``waiting_s``: seconds until it runs out),
    up to 40 frames.

    While the listener waiting is short of audio too (less than a full window's decoding), no smaller than
    the sustainable ``floor`` (None: no size is sustainable, so the largest): both are short, and windows
    sized to short budgets cost more per second of audio than the pair plays, so both would only fall
    further behind. While the other has audio to spare, it pays for this listener's small windows: a
    newcomer, or a piece's start (traced: the floor there turned a 12-frame second window into 16 frames
    and a 43 ms gap, and later a 31-frame window into a 240 ms stall while the other listener had 1 s)."""
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


class Lane:
    """One listener's synthesis work, in speaking order, as a single scheduler job at a time.

    The job decodes one window per turn and hands the worker back with the deadline of the next window:
    the moment this listener would run out of audio (``play_end``). So another session's first window,
    due now, goes ahead of this session's later windows that are not due yet; and a session's own pieces
    never overtake each other, because they share one lane.
    """

    def __init__(self, service: SpeechService) -> None:
        self._service = service
        self._lock = threading.Lock()
        self._queue: deque[_Work] = deque()
        self._current: _Work | None = None
        self._active = False
        self._parked = False  # stopped decoding: too much audio unsent
        self._unsent = 0  # samples decoded and not yet taken by the sender
        self.play_end = 0.0  # monotonic time at which the audio decoded so far will have played out

    @property
    def unsent_s(self) -> float:
        return self._unsent / self._service.engine.sample_rate

    def add(self, piece: Piece, request: ResolvedRequest, sink: PieceAudio) -> None:
        """Called on the event loop."""
        with self._lock:
            self._queue.append(_Work(piece, request, sink))
            if self._active:
                return
            self._set_active(True)
            self._parked = False
        self._schedule()

    def abandoned(self, sink: PieceAudio) -> None:
        """A piece was cancelled (barge-in, the client left): if its window is being decoded right now,
        that run ends at once instead of finishing for nobody (measured: the next answer's first audio
        waited for up to a 40-frame window). Called on the event loop."""
        with self._lock:
            work = self._current
        if work is not None and work.sink is sink:
            work.stop.stop()

    def taken(self, samples: int) -> None:
        """The sender took (or dropped) decoded audio. Called on the event loop."""
        with self._lock:
            self._unsent -= samples
            resume = self._parked and self._unsent <= RESUME_UNSENT_S * self._service.engine.sample_rate
            if resume:
                self._parked = False
                self._set_active(True)
        if resume:
            self._schedule()

    def _schedule(self) -> None:
        """Queue the lane's next turn, due when this listener's audio runs out (now, if it already has)."""
        self._service.scheduler.submit(self._step, deadline=max(self.play_end, time.monotonic()))

    def restart_playback(self) -> None:
        """The listener's queued audio was thrown away (barge-in): nothing is playing any more, so its next
        window is due now, not when the cancelled audio would have ended."""
        self.play_end = time.monotonic()

    def _set_active(self, active: bool) -> None:
        """Under ``_lock``: the lane has work to decode (or not), which the server counts (``overloaded``)."""
        if active != self._active:
            self._active = active
            self._service.lane_activity(1 if active else -1)

    def _next_work(self) -> _Work | None:
        with self._lock:
            while True:
                work = self._current
                if work is not None and not work.sink.abandoned:
                    if self._unsent > MAX_UNSENT_S * self._service.engine.sample_rate:
                        self._parked = True  # ``taken`` resumes the lane once the sender catches up
                        self._set_active(False)
                        return None
                    return work
                if work is not None:  # abandoned (barge-in, disconnect): stop decoding it
                    if work.windows is not None:
                        work.windows.close()
                    work.sink.finish()
                if not self._queue:
                    self._current = None
                    self._set_active(False)
                    return None
                self._current = self._queue.popleft()

    def _step(self) -> int | Requeue:
        work = self._next_work()
        if work is None:
            return 0
        service = self._service
        started = time.perf_counter()
        buffered_s = self.play_end - time.monotonic()
        alone = service.scheduler.alone
        try:
            if work.windows is None:
                buffered = self.play_end - time.monotonic()
                plan = THROUGHPUT_PLAN if buffered > BUFFERED_ENOUGH_S or service.overloaded else None
                work.windows = service.engine.stream_piece(
                    work.piece,
                    work.request.voice,
                    max(MIN_SPEED, min(MAX_SPEED, work.request.speed * work.piece.rate)),
                    service.config.stream_windows,
                    plan,
                    cap=self._window_cap,
                    on_words=work.sink.words,
                )
            with service.engine.interruptible(work.stop):
                window = next(work.windows, None)
        except Exception as exc:
            if not work.stop.stopped:  # a stopped run raises by design: its piece is already abandoned
                work.sink.fail(exc)
            else:
                work.sink.finish()
            self._drop_current()
            return Requeue(time.monotonic())
        work.busy_s += time.perf_counter() - started
        if window is None:
            work.pending = None  # the piece's tail: not a measure of the window size's cost
            service.metrics.observe_model_call(work.busy_s, work.samples / service.engine.sample_rate)
            # The pause the piece's punctuation calls for: generated silence, no model work.
            if work.piece.pause_ms is not None:  # an SSML <break>
                pause = np.zeros(work.piece.pause_ms * service.engine.sample_rate // 1000, dtype=np.float32)
            else:
                pause = pause_samples(work.piece.pause, work.request.pauses, service.engine.sample_rate)
            if pause.size:
                with self._lock:
                    self._unsent += pause.size
                work.sink.push(pause)
                self.play_end = max(self.play_end, time.monotonic()) + pause.size / service.engine.sample_rate
            work.sink.finish()
            self._drop_current()
            return Requeue(max(self.play_end, time.monotonic()))
        with self._lock:
            self._unsent += window.size
        work.sink.push(window)
        alone = alone and service.scheduler.alone
        elapsed_s = time.perf_counter() - started
        audio_s = window.size / service.engine.sample_rate
        if work.pending is not None:
            service.observe_decode(*work.pending)
        # A piece's first window runs the front model too: a cost of the piece, not of the window's size.
        work.pending = None if work.samples == 0 else (elapsed_s, audio_s, alone)
        now = time.monotonic()
        if service.trace is not None:
            service.trace.append(
                (now, id(self), window.size / SAMPLES_PER_FRAME, elapsed_s, buffered_s, work.samples == 0,
                 service.active_lanes)
            )  # fmt: skip
        work.samples += window.size
        self.play_end = max(self.play_end, now) + audio_s
        return Requeue(self.play_end)

    def _window_cap(self) -> int:
        service = self._service
        scheduler = service.scheduler
        due = scheduler.earliest_waiting()
        if scheduler.policy != "deadline":
            return LARGEST_WINDOW_FRAMES if due is None else FIFO_SHARED_WINDOW_FRAMES
        if service.overloaded:
            return PAST_CAPACITY_WINDOW_FRAMES
        cost = service.window_cost
        now = time.monotonic()
        frames = window_frames(
            cost,
            own_s=self.play_end - now,
            waiting_s=None if due is None else due - now,
            floor=cost.floor_frames(service.active_lanes),
        )
        return batch_bucket(frames) if service.config.decode_batch > 1 else frames

    def _drop_current(self) -> None:
        with self._lock:
            self._current = None
