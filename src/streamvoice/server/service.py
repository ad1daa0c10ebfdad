"""The speech service both routes share: request validation, planning, and scheduled model calls.

Routes own transport; this module owns the rules (what a valid request is, how a message becomes model
calls, when each call is due).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamvoice.engine.alignment import shift
from streamvoice.engine.g2p import LanguagePackMissing
from streamvoice.engine.kokoro import EngineError, KokoroEngine
from streamvoice.engine.planning import MESSAGE_POLICY, Piece
from streamvoice.engine.voice_stats_cache import prepare as prepare_voice_stats
from streamvoice.engine.voices import VoiceError, VoiceSpec
from streamvoice.protocol import (
    DEFAULT_FORMAT,
    DEFAULT_VOICE,
    SAMPLE_RATE,
    ErrorCode,
    Pauses,
    ProtocolError,
    Synthesize,
    check_rate_for_format,
    output_rate,
)
from streamvoice.server.admission import Admission, DecodeSpeed, Mode, measured_capacity
from streamvoice.server.config import ServerConfig
from streamvoice.server.lane import Lane
from streamvoice.server.metrics import Metrics
from streamvoice.server.piece_audio import PieceAudio, Words
from streamvoice.server.scheduler import Policy, SynthesisScheduler
from streamvoice.server.window_cost import FRAME_S, WindowCost
from streamvoice.text.chunker import chunk_paragraphs
from streamvoice.text.pronounce import MarkupError, check_lexicon, to_segments

log = logging.getLogger("streamvoice.server")
STEADY_WINDOW_S = 0.75  # windows at least this long (the full size is 1 s) measure the machine's speed
INITIAL_RTF = 0.5  # seconds of work per second of audio assumed before the warm-up measures it


@dataclass(frozen=True)
class SessionDefaults:
    voice: str = DEFAULT_VOICE
    speed: float = 1.0
    format: str = DEFAULT_FORMAT
    lang: str | None = None
    sample_rate: int | None = None  # None: the format's own default (8 kHz for G.711, else 24 kHz)
    pauses: Pauses | None = None  # None: the server's
    lexicon: Mapping[str, str] = field(default_factory=dict)  # the session's; over the server's


@dataclass(frozen=True)
class ResolvedRequest:
    text: str
    voice: VoiceSpec
    speed: float
    format: str
    lang: str
    sample_rate: int = SAMPLE_RATE
    pauses: Pauses = field(default_factory=Pauses)
    ssml: bool | None = None  # None: SSML when the text starts with <speak>
    lexicon: Mapping[str, str] = field(default_factory=dict)  # the server's, then the session's


class SpeechService:
    def __init__(self, engine: KokoroEngine, config: ServerConfig, metrics: Metrics | None = None) -> None:
        self.engine = engine
        self.config = config
        self.metrics = metrics or Metrics()
        batch = config.decode_batch  # validated 1-16
        self.scheduler = SynthesisScheduler(
            workers=max(config.synth_workers, batch), policy=_policy(config.scheduler)
        )
        if batch > 1:  # the workers' windows meet in one batcher (see ``engine.decode_batcher``)
            engine.enable_batching(
                batch, config.decode_batch_linger_ms / 1000, lambda: self.scheduler.running
            )
        self.ready = False
        self.draining = False
        # Seconds of decoding per second of audio. Both start pessimistic and follow the machine: the speed
        # of full-size windows (what admission sizes with) and the cost of a window by its size (what
        # windows are sized with, so that a waiting listener is served in time).
        self.decode_speed = DecodeSpeed(INITIAL_RTF)
        self.window_cost = WindowCost(INITIAL_RTF)
        self.sessions: set[Any] = set()  # live BidiSessions, told to wind down on drain
        # When a list: every decoded window as (monotonic end, lane, frames, seconds of work, audio the
        # listener had buffered when it started, piece start, listeners with work), for ``bench.capacity
        # --trace``: what explains a run where listeners stall.
        self.trace: list[tuple[float, int, float, float, float, bool, int]] | None = None
        self._active_lanes = 0  # listeners with work to decode right now
        self._lanes_lock = threading.Lock()
        self.admission = Admission(
            _mode(config.admission),
            self.capacity,
            queue_bound=config.admission_queue,
            max_wait_s=config.admission_wait_s,
            idle_release_s=config.admission_idle_s,
            max_hold_s=config.admission_max_hold_s,
        )
        # Text planning (cutting, phonemising) runs one chunk at a time on its own thread, outside the
        # model's scheduler and the shared pool: a long message yields its first piece before the rest is
        # planned, a cancelled one stops between chunks, and no client can occupy more than this thread.
        self._planner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="plan")
        self.lexicon = load_lexicon(config.lexicon_file)

    def begin_drain(self) -> None:
        """Shutdown, step one: /ping turns unhealthy, new work is refused, sessions finish what they hold."""
        self.draining = True
        for session in list(self.sessions):
            session.drain()

    def capacity(self) -> int:
        """Real-time listeners this server keeps fed: configured, or measured from the decoding speed."""
        return self.config.admission_listeners or measured_capacity(
            self.config.synth_workers, self.decode_speed.rtf
        )

    @property
    def overloaded(self) -> bool:
        """At least two more listeners have work to decode than the server keeps fed: windows then go for
        throughput (``lane``). One beyond is not enough: the capacity is an estimate, and a server wrongly in
        this state makes listeners it could keep fed stall on long windows (measured: 9 s with two
        listeners when a slow spell put the estimate at one), while wrongly out of it, it only stays as it
        was."""
        return self._active_lanes > self.capacity() + 1

    @property
    def active_lanes(self) -> int:
        """Listeners with work to decode right now."""
        return self._active_lanes

    def lane_activity(self, delta: int) -> None:
        with self._lanes_lock:
            self._active_lanes += delta

    def observe_decode(self, seconds: float, audio_s: float, alone: bool = False) -> None:
        """A window of a piece, neither its first (which runs the front model, a cost of the piece) nor its
        last (which decodes the trimmed tail). ``alone``: no other model work ran or waited meanwhile, so
        this is the machine's own speed; contended windows would make the estimate fall with load. Only
        full-size windows count for the capacity: small windows cost ~2x per second of audio, and mixing
        them in put the estimate on the edge between 1 and 2 listeners when two are kept fed."""
        if alone and audio_s > 0:
            self.window_cost.observe(audio_s / FRAME_S, seconds)
            if audio_s >= STEADY_WINDOW_S:
                self.decode_speed.observe(seconds, audio_s)

    def start(self) -> None:
        self.scheduler.start()

    def stop(self) -> None:
        self.scheduler.stop()
        self._planner.shutdown(wait=False, cancel_futures=True)

    async def warm_up(self) -> None:
        voices = self.config.warm_voice_list
        stats_dir = Path(self.config.voice_stats_dir) if self.config.voice_stats_dir else None
        found = await self.scheduler.submit(lambda: prepare_voice_stats(self.engine, stats_dir), deadline=0.0)
        log.info("voice statistics: %s", found)
        await self.scheduler.submit(lambda: self.engine.warm_up(voices), deadline=0.0)
        # A first measure of this machine's speed, until real windows refine it: full-size windows timed
        # alone, what a listener's steady decoding costs (and what admission counts listeners with).
        timed = await self.scheduler.submit(lambda: self.engine.time_windows(voices[0]), deadline=0.0)
        audio_s = sum(audio for audio, _ in timed)
        if audio_s > 0:
            rtf = sum(work for _, work in timed) / audio_s
            self.decode_speed.reset(rtf)
            self.window_cost.reset(rtf)
            log.info(
                "full windows: %.3f s of compute per second of audio; admission counts %d listener(s)",
                rtf,
                self.capacity(),
            )
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
        sample_rate: int | None = None,
        ssml: bool | None = None,
    ) -> ResolvedRequest:
        try:
            spec = self.engine.parse_voice(voice or defaults.voice)
        except VoiceError as exc:
            raise ProtocolError(ErrorCode.UNKNOWN_VOICE, str(exc), msg_id) from None
        try:
            resolved_lang = self.engine.resolve_lang(spec, lang or defaults.lang)
        except EngineError as exc:
            raise ProtocolError(ErrorCode.INVALID_FIELD, str(exc), msg_id) from None
        except LanguagePackMissing as exc:
            raise ProtocolError(ErrorCode.LANGUAGE_UNAVAILABLE, str(exc), msg_id) from None
        fmt = fmt or defaults.format
        rate = output_rate(fmt, sample_rate or defaults.sample_rate)
        check_rate_for_format(fmt, rate, msg_id)
        return ResolvedRequest(
            text=text,
            voice=spec,
            speed=speed if speed is not None else defaults.speed,
            format=fmt,
            lang=resolved_lang,
            sample_rate=rate,
            pauses=defaults.pauses or self.config.pauses,
            ssml=ssml,
            lexicon={**self.lexicon, **defaults.lexicon} if defaults.lexicon else self.lexicon,
        )

    def resolve_message(self, msg: Synthesize, defaults: SessionDefaults) -> ResolvedRequest:
        """A session (or ``/invocations``) synthesize message over the caller's defaults."""
        return self.resolve(
            msg.text, defaults, msg.voice, msg.speed, msg.format, msg.lang, msg.id, msg.sample_rate, msg.ssml
        )

    async def plan(self, request: ResolvedRequest) -> AsyncIterator[Piece]:
        """The message's model calls in speaking order, each as soon as its chunk is planned.

        Cancelling the consumer stops planning at the next chunk boundary (a few milliseconds of work).
        """
        loop = asyncio.get_running_loop()
        try:  # on the planning thread, like the rest of planning: SSML and lexicons are not the loop's work
            segments = await loop.run_in_executor(
                self._planner,
                to_segments,
                request.text,
                request.ssml,
                request.lexicon,
                request.lang == "en-gb",
            )
        except MarkupError as exc:
            raise ProtocolError(ErrorCode.INVALID_SSML, str(exc)) from None
        planned = 0
        for segment in segments:
            chunks = await loop.run_in_executor(self._planner, chunk_paragraphs, segment.text, MESSAGE_POLICY)
            for i, (chunk, paragraph_end) in enumerate(chunks):
                pieces = await loop.run_in_executor(
                    self._planner, self.engine.planner.plan_chunk, chunk, request.lang, paragraph_end
                )
                planned += len(pieces)
                for k, piece in enumerate(pieces):
                    last = i == len(chunks) - 1 and k == len(pieces) - 1
                    pause_ms = segment.pause_ms if last else None
                    if pause_ms is not None or segment.rate != 1.0:
                        piece = replace(piece, pause_ms=pause_ms, rate=segment.rate)
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

    async def plan_into(
        self,
        request: ResolvedRequest,
        lane: Lane,
        submitted: list[PieceAudio],
        ready: asyncio.Queue[PieceAudio | None],
    ) -> None:
        """Plan the message and queue each piece on the lane as soon as it is planned (so piece N+1 decodes
        while piece N is on the wire); each piece's audio goes to ``submitted`` and to the consumer's
        ``ready`` queue, whose end marker the caller adds when this ends (done, failed or cancelled)."""
        async for piece in self.plan(request):
            submitted.append(self.submit(piece, request, lane))
            ready.put_nowait(submitted[-1])

    async def audio_pieces(self, request: ResolvedRequest) -> AsyncGenerator[NDArray[np.float32] | Words]:
        """Audio chunks (decoder windows) in order as each is ready, each piece's word times (from the
        message's first sample) before its audio; abandons queued work if the caller leaves."""
        streams: asyncio.Queue[PieceAudio | None] = asyncio.Queue()
        submitted: list[PieceAudio] = []
        planner = asyncio.create_task(self.plan_into(request, self.lane(), submitted, streams))
        planner.add_done_callback(lambda _: streams.put_nowait(None))
        try:
            samples = 0
            while (stream := await streams.get()) is not None:
                offset_ms = samples * 1000 / self.engine.sample_rate
                async for window in stream.windows():
                    if isinstance(window, Words):
                        yield Words(shift(window.times, offset_ms))
                    else:
                        samples += window.size
                        yield window
            await planner  # raises what planning raised (e.g. nothing speakable)
        finally:
            planner.cancel()
            for stream in submitted:
                stream.cancel()


def load_lexicon(path: str | None) -> dict[str, str]:
    """The server's lexicon file (JSON: word -> "/phonemes/" or a respelling); a bad one stops the start
    with a message naming the file, rather than being ignored."""
    if not path:
        return {}
    try:
        return check_lexicon(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise ValueError(f"STREAMVOICE_LEXICON_FILE {path}: {exc}") from None


def _mode(name: str) -> Mode:
    if name == "refuse":
        return "refuse"
    if name == "queue":
        return "queue"
    return "off"


def _policy(name: str) -> Policy:
    if name == "deadline":
        return "deadline"
    if name == "fifo":
        return "fifo"
    raise ValueError(f"scheduler must be 'deadline' or 'fifo', not {name!r}")
