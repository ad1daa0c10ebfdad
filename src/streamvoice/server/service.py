"""The speech service both routes share: request validation, planning, and scheduled model calls.

Routes own transport; this module owns the rules (what a valid request is, how a message becomes model
calls, when each call is due).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Generator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from streamvoice.engine.kokoro import MESSAGE_POLICY, EngineError, KokoroEngine, Piece
from streamvoice.engine.streaming import THROUGHPUT_PLAN
from streamvoice.engine.voices import VoiceError, VoiceSpec
from streamvoice.protocol import DEFAULT_FORMAT, DEFAULT_VOICE, ErrorCode, ProtocolError
from streamvoice.server.config import ServerConfig
from streamvoice.server.metrics import Metrics
from streamvoice.server.scheduler import Requeue, SynthesisScheduler
from streamvoice.text.chunker import chunk_text


@dataclass(frozen=True)
class SessionDefaults:
    voice: str = DEFAULT_VOICE
    speed: float = 1.0
    format: str = DEFAULT_FORMAT
    lang: str | None = None


@dataclass(frozen=True)
class ResolvedRequest:
    text: str
    voice: VoiceSpec
    speed: float
    format: str
    lang: str


class SpeechService:
    def __init__(self, engine: KokoroEngine, config: ServerConfig, metrics: Metrics | None = None) -> None:
        self.engine = engine
        self.config = config
        self.metrics = metrics or Metrics()
        self.scheduler = SynthesisScheduler(workers=config.synth_workers, policy=_policy(config.scheduler))
        self.ready = False
        self.draining = False
        # Seconds of decoding per second of audio, per window (fixed costs included): sizes windows so a
        # waiting listener is served in time. Starts pessimistic; follows the machine within a few windows.
        self.decode_rtf = 0.5
        self.sessions: set[Any] = set()  # live BidiSessions, told to wind down on drain
        # Text planning (cutting, phonemising) runs one chunk at a time on its own thread, outside the
        # model's scheduler and the shared pool: a long message yields its first piece before the rest is
        # planned, a cancelled one stops between chunks, and no client can occupy more than this thread.
        self._planner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="plan")

    def begin_drain(self) -> None:
        """Shutdown, step one: /ping turns unhealthy, new work is refused, sessions finish what they hold."""
        self.draining = True
        for session in list(self.sessions):
            session.drain()

    def observe_decode(self, seconds: float, audio_s: float) -> None:
        if audio_s > 0:
            self.decode_rtf = 0.8 * self.decode_rtf + 0.2 * (seconds / audio_s)

    def start(self) -> None:
        self.scheduler.start()

    def stop(self) -> None:
        self.scheduler.stop()
        self._planner.shutdown(wait=False, cancel_futures=True)

    async def warm_up(self) -> None:
        voices = self.config.warm_voice_list
        await self.scheduler.submit(lambda: self.engine.warm_up(voices), deadline=0.0)
        self.ready = True

    def resolve(
        self,
        text: str,
        defaults: SessionDefaults,
        voice: str | None = None,
        speed: float | None = None,
        fmt: str | None = None,
        lang: str | None = None,
        msg_id: str | None = None,
    ) -> ResolvedRequest:
        try:
            spec = self.engine.parse_voice(voice or defaults.voice)
        except VoiceError as exc:
            raise ProtocolError(ErrorCode.UNKNOWN_VOICE, str(exc), msg_id) from None
        try:
            resolved_lang = self.engine.resolve_lang(spec, lang or defaults.lang)
        except EngineError as exc:
            raise ProtocolError(ErrorCode.INVALID_FIELD, str(exc), msg_id) from None
        return ResolvedRequest(
            text=text,
            voice=spec,
            speed=speed if speed is not None else defaults.speed,
            format=fmt or defaults.format,
            lang=resolved_lang,
        )

    async def plan(self, request: ResolvedRequest) -> AsyncIterator[Piece]:
        """The message's model calls in speaking order, each as soon as its chunk is planned.

        Cancelling the consumer stops planning at the next chunk boundary (a few milliseconds of work).
        """
        loop = asyncio.get_running_loop()
        chunks = await loop.run_in_executor(self._planner, chunk_text, request.text, MESSAGE_POLICY)
        planned = 0
        for chunk in chunks:
            pieces = await loop.run_in_executor(self._planner, self.engine.plan_chunk, chunk, request.lang)
            planned += len(pieces)
            for piece in pieces:
                yield piece
        if not planned:
            raise ProtocolError(
                ErrorCode.EMPTY_TEXT, "the text has nothing speakable in it (no letters or numbers to read)"
            )

    def lane(self) -> Lane:
        return Lane(self)

    def submit(self, piece: Piece, request: ResolvedRequest, lane: Lane) -> PieceAudio:
        """Queue one piece on the listener's lane; its audio arrives window by window."""
        sink = PieceAudio(asyncio.get_running_loop(), lane)
        lane.add(piece, request, sink)
        return sink

    async def audio_pieces(self, request: ResolvedRequest) -> AsyncGenerator[NDArray[np.float32]]:
        """Audio chunks (decoder windows) in order as each is ready; abandons queued work if the caller leaves.

        Every piece is queued as soon as it is planned, so piece N+1 decodes while piece N is on the wire.
        """
        lane = self.lane()
        streams: asyncio.Queue[PieceAudio | None] = asyncio.Queue()
        submitted: list[PieceAudio] = []

        async def plan_all() -> None:
            async for piece in self.plan(request):
                submitted.append(self.submit(piece, request, lane))
                streams.put_nowait(submitted[-1])

        planner = asyncio.create_task(plan_all())
        planner.add_done_callback(lambda _: streams.put_nowait(None))
        try:
            while (stream := await streams.get()) is not None:
                async for window in stream.windows():
                    yield window
            await planner  # raises what planning raised (e.g. nothing speakable)
        finally:
            planner.cancel()
            for stream in submitted:
                stream.cancel()


_END: Final = object()  # the piece's last window was delivered
_CANCELLED: Final = object()


class PieceAudio:
    """One piece's audio as the worker thread decodes it, window by window, handed to the event loop.

    Everything reaches the loop through one queue, in order: windows, then exactly one end marker (done,
    failed with an exception, or cancelled). The lane is told when the consumer has taken a window, so it
    can stop decoding for a listener whose audio is piling up unsent.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, lane: Lane | None = None) -> None:
        self._loop = loop
        self._lane = lane
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._ended = False
        self.abandoned = False

    # -- worker thread ------------------------------------------------------------------------------
    def push(self, window: NDArray[np.float32]) -> None:
        self._post(window)

    def finish(self) -> None:
        """The last window was pushed (pushes are delivered first: one queue, in order)."""
        self._post(_END)

    def fail(self, exc: BaseException) -> None:
        self._post(exc)

    def _post(self, item: Any) -> None:
        with contextlib.suppress(RuntimeError):  # loop closed: nobody is listening
            self._loop.call_soon_threadsafe(self._deliver, item)

    # -- event loop ---------------------------------------------------------------------------------
    def _deliver(self, item: Any) -> None:
        if self._ended:
            if isinstance(item, np.ndarray):
                self._taken(item.size)  # decoded after the listener left: nobody will take it
            return
        if not isinstance(item, np.ndarray):
            self._ended = True
        self._queue.put_nowait(item)

    def _taken(self, samples: int) -> None:
        if self._lane is not None:
            self._lane.taken(samples)

    def cancel(self) -> None:
        """Abandon the piece: the lane stops decoding it, and windows not yet taken are released."""
        self.abandoned = True
        if self._ended:
            return
        self._ended = True
        released = 0
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if isinstance(item, np.ndarray):
                released += item.size
        self._taken(released)
        self._queue.put_nowait(_CANCELLED)

    async def windows(self) -> AsyncIterator[NDArray[np.float32]]:
        """Windows in order until the piece ends or is cancelled; raises the model's exception."""
        while True:
            item = await self._queue.get()
            if isinstance(item, np.ndarray):
                yield item
                self._taken(item.size)  # the consumer came back for more: it has dealt with this one
            elif item is _END or item is _CANCELLED:
                return
            else:
                raise item


def _policy(name: str):  # type: ignore[no-untyped-def]
    if name not in ("deadline", "fifo"):
        raise ValueError(f"scheduler must be 'deadline' or 'fifo', not {name!r}")
    return name


@dataclass
class _Work:
    piece: Piece
    request: ResolvedRequest
    sink: PieceAudio
    windows: Generator[NDArray[np.float32]] | None = None
    samples: int = 0
    busy_s: float = 0.0


# A listener with this much audio still to play gets throughput-sized windows for its next piece.
BUFFERED_ENOUGH_S = 1.5
# A window cannot be interrupted: a newcomer's first audio, or another listener's next window, waits for
# the one being decoded. So a window is sized, when it starts, to end before the most urgent waiting
# listener runs out of audio (with a margin for that listener's own next window); never below the
# smallest size worth a call, and never above 40 frames (1 s of audio, ~0.4 s of decoding on 2 cores)
# even when alone, because a newcomer may arrive at any moment.
SMALLEST_WINDOW_FRAMES = 12
LARGEST_WINDOW_FRAMES = 40
FIFO_SHARED_WINDOW_FRAMES = 24  # FIFO knows no deadlines: a fixed size while others wait
WINDOW_MARGIN_S = 0.3
FRAME_S = 0.025
# Decoded audio a listener has not taken yet (unsent) beyond which its lane stops decoding until the sender
# catches up: what a slow or stalled reader can make the server hold is bounded per listener.
MAX_UNSENT_S = 6.0
RESUME_UNSENT_S = 3.0


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
            self._active = True
            self._parked = False
        self._service.scheduler.submit(self._step, deadline=max(self.play_end, time.monotonic()))

    def taken(self, samples: int) -> None:
        """The sender took (or dropped) decoded audio. Called on the event loop."""
        with self._lock:
            self._unsent -= samples
            resume = self._parked and self._unsent <= RESUME_UNSENT_S * self._service.engine.sample_rate
            if resume:
                self._parked = False
                self._active = True
        if resume:
            self._service.scheduler.submit(self._step, deadline=max(self.play_end, time.monotonic()))

    def restart_playback(self) -> None:
        """The listener's queued audio was thrown away (barge-in): nothing is playing any more, so its next
        window is due now, not when the cancelled audio would have ended."""
        self.play_end = time.monotonic()

    def _next_work(self) -> _Work | None:
        with self._lock:
            while True:
                work = self._current
                if work is not None and not work.sink.abandoned:
                    if self._unsent > MAX_UNSENT_S * self._service.engine.sample_rate:
                        self._parked = True  # ``taken`` resumes the lane once the sender catches up
                        self._active = False
                        return None
                    return work
                if work is not None:  # abandoned (barge-in, disconnect): stop decoding it
                    if work.windows is not None:
                        work.windows.close()
                    work.sink.finish()
                if not self._queue:
                    self._current = None
                    self._active = False
                    return None
                self._current = self._queue.popleft()

    def _step(self) -> int | Requeue:
        work = self._next_work()
        if work is None:
            return 0
        service = self._service
        started = time.perf_counter()
        try:
            if work.windows is None:
                buffered = self.play_end - time.monotonic()
                plan = THROUGHPUT_PLAN if buffered > BUFFERED_ENOUGH_S else None
                work.windows = service.engine.stream_piece(
                    work.piece,
                    work.request.voice,
                    work.request.speed,
                    service.config.stream_windows,
                    plan,
                    cap=self._window_cap,
                )
            window = next(work.windows, None)
        except Exception as exc:
            work.sink.fail(exc)
            self._drop_current()
            return Requeue(time.monotonic())
        work.busy_s += time.perf_counter() - started
        if window is None:
            service.metrics.observe_model_call(work.busy_s, work.samples / service.engine.sample_rate)
            work.sink.finish()
            self._drop_current()
            return Requeue(max(self.play_end, time.monotonic()))
        with self._lock:
            self._unsent += window.size
        work.sink.push(window)
        service.observe_decode(time.perf_counter() - started, window.size / service.engine.sample_rate)
        work.samples += window.size
        self.play_end = max(self.play_end, time.monotonic()) + window.size / service.engine.sample_rate
        return Requeue(self.play_end)

    def _window_cap(self) -> int:
        scheduler = self._service.scheduler
        due = scheduler.earliest_waiting()
        if due is None:
            return LARGEST_WINDOW_FRAMES
        if scheduler.policy != "deadline":
            return FIFO_SHARED_WINDOW_FRAMES
        slack = due - time.monotonic() - WINDOW_MARGIN_S
        frames = int(slack / (self._service.decode_rtf * FRAME_S))
        return max(SMALLEST_WINDOW_FRAMES, min(LARGEST_WINDOW_FRAMES, frames))

    def _drop_current(self) -> None:
        with self._lock:
            self._current = None
