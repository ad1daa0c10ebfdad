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
from collections.abc import AsyncIterator, Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamvoice.engine.kokoro import EngineError, KokoroEngine, Piece
from streamvoice.engine.streaming import THROUGHPUT_PLAN
from streamvoice.engine.voices import VoiceError, VoiceSpec
from streamvoice.protocol import DEFAULT_FORMAT, DEFAULT_VOICE, ErrorCode, ProtocolError
from streamvoice.server.config import ServerConfig
from streamvoice.server.metrics import Metrics
from streamvoice.server.scheduler import Requeue, SynthesisScheduler


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

    async def plan(self, request: ResolvedRequest) -> list[Piece]:
        pieces = await asyncio.to_thread(self.engine.plan, request.text, request.lang)
        if not pieces:
            raise ProtocolError(
                ErrorCode.EMPTY_TEXT, "the text has nothing speakable in it (no letters or numbers to read)"
            )
        return pieces

    def lane(self) -> Lane:
        return Lane(self)

    def submit(self, pieces: list[Piece], request: ResolvedRequest, lane: Lane) -> list[PieceAudio]:
        """Queue every piece now, so piece N+1 is decoded while piece N is on the wire (pipelining)."""
        loop = asyncio.get_running_loop()
        sinks = [PieceAudio(loop) for _ in pieces]
        for piece, sink in zip(pieces, sinks, strict=True):
            lane.add(piece, request, sink)
        return sinks

    async def audio_pieces(self, request: ResolvedRequest) -> AsyncIterator[NDArray[np.float32]]:
        """Audio chunks (decoder windows) in order as each is ready; abandons queued work if the caller leaves."""
        pieces = await self.plan(request)
        streams = self.submit(pieces, request, self.lane())
        try:
            for stream in streams:
                async for window in stream.windows():
                    yield window
        finally:
            for stream in streams:
                stream.cancel()


class PieceAudio:
    """One piece's audio as the worker thread decodes it, window by window, handed to the event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[NDArray[np.float32]] = asyncio.Queue()
        self.future: asyncio.Future[int] = loop.create_future()
        self.abandoned = False

    def push(self, window: NDArray[np.float32]) -> None:
        """Called from the worker thread."""
        with contextlib.suppress(RuntimeError):  # loop closed: nobody is listening
            self._loop.call_soon_threadsafe(self._queue.put_nowait, window)

    def finish(self, samples: int) -> None:
        """Called from the worker thread once the last window was pushed (pushes are delivered first)."""
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(_settle, self.future, samples, None)

    def fail(self, exc: BaseException) -> None:
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(_settle, self.future, 0, exc)

    def cancel(self) -> None:
        self.abandoned = True
        self.future.cancel()

    @property
    def cancelled(self) -> bool:
        return self.future.cancelled()

    async def windows(self) -> AsyncIterator[NDArray[np.float32]]:
        """Windows in order; raises the model's exception, or CancelledError if the piece was cancelled."""
        while True:
            if not self._queue.empty():
                yield self._queue.get_nowait()
                continue
            if self.future.done():
                # every push was scheduled before the future resolved, so the queue is complete
                while not self._queue.empty():
                    yield self._queue.get_nowait()
                if self.future.cancelled():
                    raise asyncio.CancelledError
                exc = self.future.exception()
                if exc is not None:
                    raise exc
                return
            getter = asyncio.ensure_future(self._queue.get())
            waiters: set[asyncio.Future[Any]] = {getter, self.future}
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not getter.done():
                    getter.cancel()
            if getter.done() and not getter.cancelled():
                yield getter.result()


def _policy(name: str):  # type: ignore[no-untyped-def]
    if name not in ("deadline", "fifo"):
        raise ValueError(f"scheduler must be 'deadline' or 'fifo', not {name!r}")
    return name


def _settle(future: asyncio.Future[int], samples: int, exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(samples)


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
        self.play_end = 0.0  # monotonic time at which the audio decoded so far will have played out

    def add(self, piece: Piece, request: ResolvedRequest, sink: PieceAudio) -> None:
        """Called on the event loop."""
        with self._lock:
            self._queue.append(_Work(piece, request, sink))
            if self._active:
                return
            self._active = True
        self._service.scheduler.submit(self._step, deadline=max(self.play_end, time.monotonic()))

    def _next_work(self) -> _Work | None:
        with self._lock:
            while True:
                work = self._current
                if work is not None and not work.sink.abandoned:
                    return work
                if work is not None:  # abandoned (barge-in, disconnect): stop decoding it
                    if work.windows is not None:
                        work.windows.close()
                    work.sink.finish(work.samples)
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
            work.sink.finish(work.samples)
            self._drop_current()
            return Requeue(max(self.play_end, time.monotonic()))
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
