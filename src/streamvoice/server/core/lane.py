"""A listener's lane: its synthesis work in speaking order, one scheduler job at a time, window by window.

The lane is what the deadline scheduler schedules: each turn decodes one window and hands the worker back
with the deadline of the next one (when this listener would run out of audio). So another listener's first
window, due now, goes ahead of this one's later windows that are not due yet, and a listener's own pieces
never overtake each other. How large each window is: ``window_sizing``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Generator
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from streamvoice.engine.graphs import RunStop
from streamvoice.engine.planning import Piece
from streamvoice.engine.streaming.windows import SAMPLES_PER_FRAME, THROUGHPUT_PLAN
from streamvoice.engine.timing import pause_samples
from streamvoice.protocol import MAX_SPEED, MIN_SPEED
from streamvoice.server.core.lane_host import LaneHost, PieceRequest
from streamvoice.server.core.load import DecodedWindow, RecentCost
from streamvoice.server.core.piece_audio import PieceAudio
from streamvoice.server.core.scheduler import Requeue

# A listener with this much audio still to play gets throughput-sized windows for its next piece.
BUFFERED_ENOUGH_S = 1.5
# Decoded audio a listener has not taken yet (unsent) beyond which its lane stops decoding until the sender
# catches up: what a slow or stalled reader can make the server hold is bounded per listener.
MAX_UNSENT_S = 6.0
RESUME_UNSENT_S = 3.0


@dataclass
class _Work:
    piece: Piece
    request: PieceRequest
    sink: PieceAudio
    windows: Generator[NDArray[np.float32]] | None = None
    samples: int = 0
    busy_s: float = 0.0
    # The last window's (seconds of work, seconds of audio, alone), observed once the next one comes: a
    # piece's last window decodes its trailing context and the frames trimmed after the speech, so its
    # kept audio says little about its cost.
    pending: tuple[float, float, bool] | None = None
    stop: RunStop = field(default_factory=RunStop)  # ends its model run in flight when it is abandoned


class Lane:
    """One listener's synthesis work, in speaking order, as a single scheduler job at a time."""

    def __init__(self, host: LaneHost) -> None:
        self._host = host
        self._rate = host.engine.sample_rate
        self._lock = threading.Lock()
        self._queue: deque[_Work] = deque()
        self._current: _Work | None = None
        self._active = False
        self._parked = False  # stopped decoding: too much audio unsent
        self._unsent = 0  # samples decoded and not yet taken by the sender
        self.play_end = 0.0  # monotonic time at which the audio decoded so far will have played out
        self.ready_at = 0.0  # monotonic time the lane last got work after having none
        self.cost = RecentCost()  # model seconds spent on its work lately (what the watch sheds by)

    @property
    def unsent_s(self) -> float:
        return self._unsent / self._rate

    @property
    def has_work(self) -> bool:
        """Pieces wait to be decoded (a parked lane has seconds of audio unsent: it is fed)."""
        return self._active

    def margin_s(self, now: float, first_window_s: float) -> float:
        """How long before this listener goes silent for want of decoding: the audio decoded ahead of its
        playback; for work that came after a silence (the next sentence of an LLM-paced answer), the time
        its first window may take (``first_window_s``) less the time it has waited."""
        if self.play_end >= self.ready_at:
            return self.play_end - now
        return self.ready_at + first_window_s - now

    # -- the event loop's side ----------------------------------------------------------------------
    def add(self, piece: Piece, request: PieceRequest, sink: PieceAudio) -> None:
        with self._lock:
            self._queue.append(_Work(piece, request, sink))
            if self._active:
                return
            if not self._parked:
                self.ready_at = time.monotonic()
            self._set_active(True)
            self._parked = False
        self._schedule()

    def abandoned(self, sink: PieceAudio) -> None:
        """A piece was cancelled (barge-in, the client left): if its window is being decoded right now,
        that run ends at once instead of finishing for nobody."""
        with self._lock:
            work = self._current
        if work is not None and work.sink is sink:
            work.stop.stop()

    def taken(self, samples: int) -> None:
        """The sender took (or dropped) decoded audio."""
        with self._lock:
            self._unsent -= samples
            resume = self._parked and self._unsent <= RESUME_UNSENT_S * self._rate
            if resume:
                self._parked = False
                self._set_active(True)
        if resume:
            self._schedule()

    def restart_playback(self) -> None:
        """The listener's queued audio was thrown away (barge-in): nothing is playing any more, so its next
        window is due now, not when the cancelled audio would have ended. Called after the cancelled pieces
        are abandoned: a window of theirs that the worker finishes afterwards does not count (``_played``)."""
        with self._lock:
            self.play_end = time.monotonic()

    def _played(self, work: _Work, audio_s: float) -> None:
        """``audio_s`` more of this piece will play, unless it was abandoned while it was decoded (a model call
        that cannot be interrupted finishes after the barge-in; its audio is dropped, not played)."""
        with self._lock:
            if not work.sink.abandoned:
                self.play_end = max(self.play_end, time.monotonic()) + audio_s

    def _schedule(self) -> None:
        """Queue the lane's next turn, due when this listener's audio runs out (now, if it already has)."""
        self._host.scheduler.submit(self._step, deadline=max(self.play_end, time.monotonic()))

    def _set_active(self, active: bool) -> None:
        """Under ``_lock``: the lane has work to decode (or not), which the load counts (``overloaded``)."""
        if active != self._active:
            self._active = active
            self._host.load.lane_activity(1 if active else -1)

    # -- the worker's side: one turn ----------------------------------------------------------------
    def _next_work(self) -> _Work | None:
        with self._lock:
            while True:
                work = self._current
                if work is not None and not work.sink.abandoned:
                    if self._unsent > MAX_UNSENT_S * self._rate:
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
        """One turn: the next window of the current piece, or that piece's end; the next turn's deadline."""
        work = self._next_work()
        if work is None:
            return 0
        started = time.perf_counter()
        buffered_s = self.play_end - time.monotonic()
        alone = self._alone()
        try:
            if work.windows is None:
                work.windows = self._start(work, buffered_s)
            with self._host.engine.interruptible(work.stop):
                window = next(work.windows, None)
        except Exception as exc:
            if not work.stop.stopped:  # a stopped run raises by design: its piece is already abandoned
                work.sink.fail(exc)
            else:
                work.sink.finish()
            self._drop_current()
            return Requeue(time.monotonic())
        spent = time.perf_counter() - started
        work.busy_s += spent
        self.cost.add(spent, time.monotonic())
        if window is None:
            self._finish(work)
            return Requeue(max(self.play_end, time.monotonic()))
        alone = alone and self._alone()
        self._deliver(work, window, time.perf_counter() - started, buffered_s, alone)
        return Requeue(self.play_end)

    def _alone(self) -> bool:
        """No other model work and no planning: a window decoded now measures the machine's own speed."""
        return self._host.scheduler.alone and self._host.load.planning == 0

    def _start(self, work: _Work, buffered_s: float) -> Generator[NDArray[np.float32]]:
        """The piece's window generator: throughput-sized when the listener has enough audio (or the server
        is past capacity), else sized window by window (``_window_cap``)."""
        host = self._host
        plan = THROUGHPUT_PLAN if buffered_s > BUFFERED_ENOUGH_S or host.load.overloaded else None
        return host.engine.stream_piece(
            work.piece,
            work.request.voice,
            max(MIN_SPEED, min(MAX_SPEED, work.request.speed * work.piece.rate)),
            host.config.stream_windows,
            plan,
            cap=self._window_cap,
            on_words=work.sink.words,
            deadline=time.monotonic() + buffered_s,
        )

    def _deliver(
        self, work: _Work, window: NDArray[np.float32], elapsed_s: float, buffered_s: float, alone: bool
    ) -> None:
        """Hand a decoded window to the listener and measure it (once the next one shows it was not the
        piece's last)."""
        load = self._host.load
        with self._lock:
            self._unsent += window.size
        work.sink.push(window)
        audio_s = window.size / self._rate
        if work.pending is not None:
            load.observe_decode(*work.pending)
        # A piece's first window runs the front model too: a cost of the piece, not of the window's size.
        work.pending = None if work.samples == 0 else (elapsed_s, audio_s, alone)
        now = time.monotonic()
        frames = window.size / SAMPLES_PER_FRAME
        if load.window_watchers:
            first = work.samples == 0
            load.tell(DecodedWindow(now, id(self), frames, elapsed_s, buffered_s, first, load.active_lanes))
        work.samples += window.size
        self._played(work, audio_s)

    def _finish(self, work: _Work) -> None:
        """The piece's speech is done: its pause (generated silence, no model work), then its end."""
        work.pending = None  # the piece's tail: not a measure of the window size's cost
        self._host.metrics.observe_model_call(work.busy_s, work.samples / self._rate)
        if work.piece.pause_ms is not None:  # an SSML <break>
            pause = np.zeros(work.piece.pause_ms * self._rate // 1000, dtype=np.float32)
        else:
            pause = pause_samples(work.piece.pause, work.request.pauses, self._rate)
        if pause.size:
            with self._lock:
                self._unsent += pause.size
            work.sink.push(pause)
            self._played(work, pause.size / self._rate)
        work.sink.finish()
        self._drop_current()

    def _window_cap(self) -> int:
        host = self._host
        due = host.scheduler.earliest_waiting()
        now = time.monotonic()
        return host.scheduler.window_cap(
            host.load.window_cost,
            own_s=self.play_end - now,
            waiting_s=None if due is None else due - now,
            listeners=host.load.active_lanes,
            overloaded=host.load.overloaded,
            batched=host.config.decode_batch > 1,
        )

    def _drop_current(self) -> None:
        with self._lock:
            self._current = None
