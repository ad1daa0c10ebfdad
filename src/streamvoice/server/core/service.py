"""The speech service every surface shares: the engine, the model's scheduler, planning, load and admission.

It owns what exists once per process; what exists once per answer is an ``Utterance``, and once per
listener a ``Lane``. Requests are made concrete by ``requests.Resolver`` (``service.requests``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from streamvoice.engine.g2p import G2PError
from streamvoice.engine.kokoro import KokoroEngine
from streamvoice.engine.planning import MESSAGE_POLICY, Piece
from streamvoice.engine.readiness import time_pieces_at_once, time_windows, warm_up
from streamvoice.engine.streaming.voice_stats_cache import prepare as prepare_voice_stats
from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.admission import Admission
from streamvoice.server.core.config import ServerConfig
from streamvoice.server.core.dictionaries import Dictionaries
from streamvoice.server.core.lane import Lane
from streamvoice.server.core.listener import Listener
from streamvoice.server.core.load import Load
from streamvoice.server.core.metrics import Metrics
from streamvoice.server.core.requests import ResolvedRequest, Resolver, load_lexicon
from streamvoice.server.core.scheduler import SynthesisScheduler
from streamvoice.server.core.tenancy import Tenancy, turn
from streamvoice.server.core.utterance_bounds import StreamBounds
from streamvoice.server.core.utterances import Utterances
from streamvoice.server.core.watch import Watch
from streamvoice.store import Store, open_store
from streamvoice.store.keys import Keyring, Tenant
from streamvoice.text.chunker import chunk_paragraphs
from streamvoice.text.marks import spoken_length
from streamvoice.text.pronounce import MarkupError, to_segments

log = logging.getLogger("streamvoice.server")


class LiveConnection(Protocol):
    """A connection (a session, a vendor socket, a raw TCP socket) as the service asks things of it; its listener is
    its seat (``core.seat``). Surfaces register theirs in ``SpeechService.connections``; the core never knows
    which wire it speaks."""

    @property
    def busy(self) -> bool:
        """An answer is queued or in flight (what an autoscaler counts; an idle open connection is cheap)."""
        ...

    def drain(self) -> None:
        """Finish what is queued, refuse what comes next, then close."""
        ...

    @property
    def tenant(self) -> Tenant | None:
        """Whose key opened it (None: a server without keys)."""
        ...

    def revoke(self) -> None:
        """Its key was revoked or expired: stop its answers and close it with its wire's auth error."""
        ...


@dataclass
class Rooms:
    """What ``MAX_SESSIONS`` counts (``core.rooms.Room``): sockets, and answers outside a socket's (HTTP, a
    raw socket's utterance), holding a room now."""

    sessions: int = 0
    streams: int = 0

    @property
    def taken(self) -> int:
        return self.sessions + self.streams


class Doorway:
    """Sockets accepted before their key has come (a first-message key): counted apart from every room a
    caller with the key takes, and bounded (``max_keyless_sockets``), so they cost a file descriptor and a
    small buffer each, for at most ``body_timeout_s``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.waiting = 0

    def enter(self) -> bool:
        if self.waiting >= self.limit:
            return False
        self.waiting += 1
        return True

    def leave(self) -> None:
        self.waiting -= 1


class SpeechService:
    def __init__(
        self,
        engine: KokoroEngine,
        config: ServerConfig,
        metrics: Metrics | None = None,
        store: Store | None = None,
        keyring: Keyring | None = None,
    ) -> None:
        self.engine = engine
        self.config = config
        self.metrics = metrics or Metrics()
        self.store = store or open_store(config.store_url)  # connected at its first use
        self.keyring = keyring or Keyring(self.store, config.auth_token)
        self.keyring.on_revoked = self._revoked
        self.tenancy = Tenancy(self.store, self.metrics)
        self.rooms = Rooms()
        # HTTP answers' seats (``core.seat``), stopped when their key is revoked (a connection stops its own).
        self.answers: set[Listener] = set()
        self.doorway = Doorway(config.max_keyless_sockets)
        batch = config.decode_batch  # validated 1-16
        self.scheduler = SynthesisScheduler(workers=max(config.synth_workers, batch))
        if batch > 1:  # the workers' windows meet in one batcher (see ``engine.decode_batcher``)
            engine.enable_batching(
                batch, config.decode_batch_linger_ms / 1000, lambda: self.scheduler.running
            )
        self.ready = False
        self.draining = False
        self.load = Load(config.synth_workers, config.admission_listeners)
        self.connections: set[LiveConnection] = set()  # live connections, told to wind down on drain
        self.admission: Admission[Listener] = Admission(
            config.admission,
            self.load.capacity,
            queue_bound=config.admission_queue,
            max_wait_s=config.admission_wait_s,
            idle_release_s=config.admission_idle_s,
            max_hold_s=config.admission_max_hold_s,
            turn=self._turn,
        )
        self.watch = Watch(self.admission, self.metrics, self.load)
        self._watching: asyncio.Task[None] | None = None
        self._keys: asyncio.Task[None] | None = None
        self._leases: asyncio.Task[None] | None = None
        self.requests = Resolver(engine, config.pauses, load_lexicon(config.lexicon_file))
        self.dictionaries = Dictionaries(self.store)
        # Text planning (cutting, phonemising) runs one chunk at a time on its own thread, outside the
        # model's scheduler and the shared pool: a long message yields its first piece before the rest is
        # planned, a cancelled one stops between chunks, and no client can occupy more than this thread.
        self._planning_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="plan")

    @property
    def sample_rate(self) -> int:
        return self.engine.sample_rate

    def begin_drain(self) -> None:
        """Shutdown, step one: /ping turns unhealthy, new work is refused, sessions finish what they hold."""
        self.draining = True
        for connection in list(self.connections):
            connection.drain()

    def start(self) -> None:
        self.scheduler.start()
        loop = asyncio.get_running_loop()
        if self.config.admission != "off" and self.config.admission_shed:
            self._watching = loop.create_task(self.watch.run(), name="slowdown-watch")
        self._keys = loop.create_task(self.keyring.run(), name="key-ring")
        self._leases = loop.create_task(self.tenancy.run(), name="tenant-leases")

    def _turn(self, who: Listener) -> float:
        """Its tenant's place in its share (``tenancy.turn``) among those holding and waiting."""
        holding = [h.tenant for h in self.admission.holders]
        waiting = [w.tenant for w in self.admission.waiting]
        return turn(who.tenant, holding, waiting, self.admission.capacity)

    def _revoked(self, digests: set[str]) -> None:
        """Keys no longer live (revoked on any replica, or expired): their open connections close and their
        HTTP answers stop."""
        for connection in list(self.connections):
            if (tenant := connection.tenant) is not None and tenant.digest in digests:
                connection.revoke()
        revoked = ProtocolError(ErrorCode.UNAUTHORIZED, "this answer's key was revoked or has expired")
        for answer in list(self.answers):
            if (tenant := answer.tenant) is not None and tenant.digest in digests:
                answer.shed(revoked)  # it stops now (an SSE or NDJSON body ends with the error)

    def stop(self) -> None:
        for task in (self._keys, self._leases):
            if task is not None:
                task.cancel()
        if self._watching is not None:
            self._watching.cancel()
        self.scheduler.stop()
        self._planning_thread.shutdown(wait=False, cancel_futures=True)

    async def warm_up(self) -> None:
        voices = self.config.warm_voice_list
        stats_dir = Path(self.config.voice_stats_dir) if self.config.voice_stats_dir else None
        found = await self.scheduler.submit(lambda: prepare_voice_stats(self.engine, stats_dir), deadline=0.0)
        log.info("voice statistics: %s", found)
        await self.scheduler.submit(lambda: warm_up(self.engine, voices), deadline=0.0)
        # A first measure of this machine's speed, until real windows refine it: full-size windows timed
        # alone, what a listener's steady decoding costs (and what admission counts listeners with).
        if self.engine.graph.windows:
            timed = await self.scheduler.submit(lambda: time_windows(self.engine, voices[0]), deadline=0.0)
        else:  # whole pieces (the PyTorch engine): priced with every model worker busy at once
            workers = self.config.synth_workers
            timed = await self.scheduler.submit(
                lambda: time_pieces_at_once(self.engine, voices[0], workers), deadline=0.0
            )
        audio_s = sum(audio for audio, _ in timed)
        if audio_s > 0:
            rtf = sum(work for _, work in timed) / audio_s
            self.load.calibrate(rtf)
            log.info(
                "full windows: %.3f s of compute per second of audio; admission counts %d listener(s)",
                rtf,
                self.load.capacity(),
            )
        self.ready = True

    @property
    def quiet_cut_s(self) -> float:
        return self.config.stream_quiet_cut_ms / 1000

    @property
    def stream_bounds(self) -> StreamBounds:
        """Every surface's streamed text: ``MAX_STREAM_CHARS`` in all, ended after ``STREAM_TEXT_TIMEOUT_S``
        without text."""
        return StreamBounds(
            self.config.max_stream_chars, self.config.stream_text_timeout_s, self.config.max_text_chars
        )

    def lane(self) -> Lane:
        return Lane(self)

    def utterances(self) -> Utterances:
        """A listener's queue of answers on one lane (a session, a vendor connection)."""
        return Utterances(self, self.lane(), self.quiet_cut_s, self.stream_bounds, self.tenancy)

    async def _on_planning_thread[T](self, fn: Callable[..., T], *args: Any) -> T:
        """``fn`` on the planning thread. Callers wait in arrival order and each utterance plans one chunk
        at a time, so every caller with text to plan gets its turn every few chunks, whatever others send
        (each chunk's work is bounded: ``engine.g2p.bounds``). Counted in ``load.planning`` meanwhile."""
        self.load.planning += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._planning_thread, fn, *args)
        finally:
            self.load.planning -= 1

    async def plan(
        self, request: ResolvedRequest, grew: Callable[[int], None] = lambda chars: None
    ) -> AsyncIterator[Piece]:
        """The text's model calls in speaking order, each as soon as its chunk is planned. ``grew`` is told,
        before anything is planned, how many characters the lexicons and dictionaries added to what will be
        spoken (it raises when that passes the utterance's bound).

        Cancelling the consumer stops planning at the next chunk boundary (a few milliseconds of work).
        """
        try:  # on the planning thread, like the rest of planning: SSML and lexicons are not the loop's work
            segments = await self._on_planning_thread(
                to_segments,
                request.text,
                request.ssml,
                request.lexicon,
                request.lang == "en-gb",
                request.lang,
            )
        except MarkupError as exc:
            raise ProtocolError(ErrorCode.INVALID_SSML, str(exc)) from None
        if request.lexicon:
            grew(sum(spoken_length(s.text) for s in segments) - len(request.text))
        planned = 0
        for segment in segments:
            chunks = await self._on_planning_thread(chunk_paragraphs, segment.text, MESSAGE_POLICY)
            for i, (chunk, paragraph_end) in enumerate(chunks):
                try:
                    pieces = await self._on_planning_thread(
                        self.engine.planner.plan_chunk, chunk, request.lang, paragraph_end
                    )
                except G2PError:
                    raise ProtocolError(
                        ErrorCode.INVALID_FIELD,
                        f"nothing in this text can be read in {request.lang}: check the voice's language "
                        '(or "lang") matches the text',
                    ) from None
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
