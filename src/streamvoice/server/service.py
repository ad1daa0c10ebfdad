"""The speech service both routes share: request validation, planning, and scheduled model calls.

Routes own transport; this module owns the rules (what a valid request is, how a message becomes model
calls, when each call is due).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamvoice.engine.kokoro import EngineError, KokoroEngine, Piece
from streamvoice.engine.voices import VoiceError, VoiceSpec
from streamvoice.protocol import DEFAULT_FORMAT, DEFAULT_VOICE, ErrorCode, ProtocolError
from streamvoice.server.config import ServerConfig
from streamvoice.server.metrics import Metrics
from streamvoice.server.scheduler import Requeue, SynthesisScheduler

# Seconds of audio per phoneme token at speed 1.0, plus the model's lead-in/out; measured on the bench
# texts (af_heart). Only used to estimate playback deadlines before the audio exists.
AUDIO_S_PER_TOKEN = 0.058
AUDIO_S_OVERHEAD = 0.3


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


class PlaybackClock:
    """Tracks when a listener will run out of audio, to give each model call a deadline."""

    def __init__(self) -> None:
        self.start: float | None = None
        self.scheduled_s = 0.0

    def next_deadline(self, estimated_s: float) -> float:
        now = time.monotonic()
        if self.start is None or self.start + self.scheduled_s < now:
            self.start, self.scheduled_s = now, 0.0  # listener drained: the next audio is due now
        deadline = self.start + self.scheduled_s
        self.scheduled_s += estimated_s
        return deadline


def estimate_audio_s(piece: Piece, speed: float) -> float:
    return (AUDIO_S_OVERHEAD + AUDIO_S_PER_TOKEN * len(piece.tokens)) / speed


class SpeechService:
    def __init__(self, engine: KokoroEngine, config: ServerConfig, metrics: Metrics | None = None) -> None:
        self.engine = engine
        self.config = config
        self.metrics = metrics or Metrics()
        self.scheduler = SynthesisScheduler(workers=config.synth_workers, policy=_policy(config.scheduler))
        self.ready = False
        self.draining = False
        self.sessions: set[Any] = set()  # live BidiSessions, told to wind down on drain

    def begin_drain(self) -> None:
        """Shutdown, step one: /ping turns unhealthy, new work is refused, sessions finish what they hold."""
        self.draining = True
        for session in list(self.sessions):
            session.drain()

    def start(self) -> None:
        self.scheduler.start()

    def stop(self) -> None:
        self.scheduler.stop()

    async def warm_up(self) -> None:
        await self.scheduler.submit(self.engine.warm_up, deadline=0.0)
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

    def check_defaults(self, defaults: SessionDefaults) -> SessionDefaults:
        """Validate a configure message by resolving a dummy request with the new defaults."""
        self.resolve("x", defaults)
        return replace(defaults)

    async def plan(self, request: ResolvedRequest) -> list[Piece]:
        pieces = await asyncio.to_thread(self.engine.plan, request.text, request.lang)
        if not pieces:
            raise ProtocolError(
                ErrorCode.EMPTY_TEXT, "the text has nothing speakable in it (no letters or numbers to read)"
            )
        return pieces

    def submit(self, pieces: list[Piece], request: ResolvedRequest, clock: PlaybackClock) -> list[PieceAudio]:
        """Queue every piece now (pipelining), each due when the listener would run out of audio."""
        loop = asyncio.get_running_loop()
        out = []
        for piece in pieces:
            deadline = clock.next_deadline(estimate_audio_s(piece, request.speed))
            audio = PieceAudio(loop)
            audio.future = self.scheduler.submit(
                self._steps(piece, request, audio, deadline), deadline=deadline
            )
            out.append(audio)
        return out

    def _steps(
        self, piece: Piece, request: ResolvedRequest, sink: PieceAudio, deadline: float
    ) -> Callable[[], int | Requeue]:
        """A scheduler job that decodes one window per turn and hands the worker back in between."""
        engine, metrics = self.engine, self.metrics
        windows = engine.stream_piece(piece, request.voice, request.speed, self.config.stream_windows)
        state = {"samples": 0, "busy_s": 0.0}

        def step() -> int | Requeue:
            started = time.perf_counter()
            window = None if sink.abandoned else next(windows, None)
            state["busy_s"] += time.perf_counter() - started
            if window is None:  # finished, or abandoned (barge-in, disconnect): stop decoding this piece
                windows.close()
                metrics.observe_model_call(state["busy_s"], state["samples"] / engine.sample_rate)
                return int(state["samples"])
            sink.push(window)
            state["samples"] += window.size
            # The next window is due when the audio decoded so far for this piece has played out.
            return Requeue(deadline + state["samples"] / engine.sample_rate)

        return step

    async def audio_pieces(self, request: ResolvedRequest) -> AsyncIterator[NDArray[np.float32]]:
        """Audio chunks (decoder windows) in order as each is ready; abandons queued work if the caller leaves."""
        pieces = await self.plan(request)
        streams = self.submit(pieces, request, PlaybackClock())
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
