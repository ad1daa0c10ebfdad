"""One utterance, the server's core: text in (whole, or streamed as it arrives), events out, in order.

Every surface is an adapter over this: it turns its wire into ``say`` / ``append`` / ``flush`` / ``end`` /
``cancel`` and this object's events back into its wire. What happens in between is written once:

- streamed text goes through the incremental chunker (fast first piece, the abbreviation and number
  rules) and the quiet cut (a finished sentence is spoken after ``stream_quiet_cut_ms`` of silence);
- each piece of text is planned on the service's planning thread and queued on the listener's lane the
  moment it is planned, so piece N+1 decodes while piece N is on the wire;
- events come out in speaking order: ``PieceStarted``, the piece's ``Words`` (ms from the utterance's
  first sample), its audio windows, ``PieceEnded``; then exactly one ``Completed`` or ``Failed``;
- cancelling stops planning, abandons every piece (the lane stops a window in flight), and a consumer
  that stops reading cancels too;
- streamed text is bounded (``StreamBounds``, the same on every surface): the ``append`` that passes
  ``max_chars`` is refused ``text_too_long`` and the utterance ends with what came; with no text for
  ``idle_end_s`` it is ended as it stands (``on_idle`` tells the surface), so a stream never closed does not
  hold its listener.
Checked by ``pytest tests/test_utterance.py``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import replace
from functools import partial
from typing import Protocol

from streamvoice.engine.alignment import shift
from streamvoice.engine.planning import Piece
from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.events import (
    CANCELLED,
    Completed,
    Event,
    Failed,
    Marked,
    PieceEnded,
    PieceStarted,
)
from streamvoice.server.core.heard import Heard, Transcript
from streamvoice.server.core.lane import Lane
from streamvoice.server.core.piece_audio import PieceAudio, Words
from streamvoice.server.core.requests import Prepare, ResolvedRequest
from streamvoice.server.core.streamed_text import StreamedText
from streamvoice.server.core.tenancy import Account, Tenancy
from streamvoice.server.core.utterance_bounds import Silence, StreamBounds
from streamvoice.text.pronounce import written_text
from streamvoice.timer import Timer

log = logging.getLogger("streamvoice.utterance")


class PieceSource(Protocol):
    """The service's side: plan a request into pieces (one planning thread), and the model's rate."""

    @property
    def sample_rate(self) -> int: ...

    def plan(self, request: ResolvedRequest, grew: Callable[[int], None] = ...) -> AsyncIterator[Piece]: ...


class Utterance:
    """Text in, events out, for one answer on one lane.

    ``gate`` runs before any planning (a session waits there for its previous message's planning and for a
    listener slot), then ``prepare`` (what the request still needs from the store: a caller's pronunciation
    dictionaries, fetched here and never in a wire's reader, which must not stop reading); what either raises
    is the utterance's one error.
    """

    def __init__(
        self,
        source: PieceSource,
        request: ResolvedRequest,
        lane: Lane,
        gate: Callable[[], Awaitable[None]] | None = None,
        quiet_cut_s: float = 0.0,
        uid: str | None = None,
        bounds: StreamBounds | None = None,
        tenancy: Tenancy | None = None,
        prepare: Prepare | None = None,
    ) -> None:
        self.id = uid
        self._account = Account(tenancy)  # whose share it counts in
        self.request = request
        self._source = source
        self._lane = lane
        self._gate = gate
        self._prepare = prepare
        self._streamed = StreamedText(lambda text: self._texts.put_nowait((text, False)), quiet_cut_s)
        self._texts: asyncio.Queue[tuple[str, bool] | Marked | None] = asyncio.Queue()
        self._ready: asyncio.Queue[tuple[Piece, PieceAudio] | Marked | None] = asyncio.Queue()
        self._submitted: list[PieceAudio] = []
        self._ended = False
        self.chars = 0  # text taken so far
        self.transcript = Transcript()  # what it was given and has said: what a listener cut off heard
        self.cancelled = False
        self.failure: ProtocolError | None = None  # why the server stopped it (``fail``), else None
        self.first_audio_at: float | None = None  # monotonic, when its first audio was ready
        self._bounds = bounds
        self._idle = Timer(self._went_idle)
        self.on_idle: Callable[[], None] | None = None  # told when no text came for ``idle_end_s``
        self._arm_idle()
        self._task = asyncio.create_task(self._plan())
        self._task.add_done_callback(self._planning_ended)  # runs even if cancelled unstarted

    # -- text in ------------------------------------------------------------------------------------
    def say(self, text: str | None = None) -> None:
        """The whole text (the request's own when None), planned as one message (SSML, paragraphs), and the
        end of input."""
        if not self._ended and not self.cancelled:
            whole = self.request.text if text is None else text
            self.chars += len(whole)
            self._account.wrote(len(whole))
            self.transcript.wrote(written_text(whole, self.request.ssml))
            self._texts.put_nowait((whole, True))
        self.end()

    def append(self, text: str) -> None:
        """Streamed text as it arrives (an LLM's tokens): each piece is planned once the chunker cuts it."""
        if self._ended or self.cancelled or not text:
            return
        if self._bounds is not None and (refused := self._bounds.appended(self.chars, len(text), self.id)):
            self.end()
            raise refused
        self._arm_idle()
        self.chars += len(text)
        self._account.wrote(len(text))
        self.transcript.wrote(text)
        self._streamed.feed(text)

    def flush(self) -> None:
        """Speak what is buffered now, as it stands; more text may follow."""
        if not self._ended:
            self._streamed.flush()

    def mark(self, label: int) -> None:
        """Speak what is buffered now, and tell when all of it has been spoken: ``Marked(label)`` follows the
        audio of every piece before it (a vendor's "flush done")."""
        self.flush()
        if not self._ended and not self.cancelled:
            self._texts.put_nowait(Marked(label))

    def end(self) -> None:
        """No more text: what is buffered is spoken, then the utterance completes."""
        if self._ended:
            return
        self.flush()
        self._ended = True
        self._idle.disarm()
        self._texts.put_nowait(None)

    def cancel(self) -> None:
        """Stop everything still working for this utterance; the consumer gets ``Failed(cancelled)``."""
        self.cancelled = True
        self._stop()

    def fail(self, error: ProtocolError) -> None:
        """Stop it as ``cancel`` does, for the server's own reason: the consumer gets ``Failed(error)`` (a
        listener shed when the machine slowed down is told ``server_busy``, not ``cancelled``)."""
        if not self.cancelled:
            self.failure = error
        self.cancel()

    def heard(self, played_ms: float) -> Heard:
        """What a listener whose player played ``played_ms`` of this utterance's audio heard of its text,
        and what not: the text that arrived but was never spoken is unheard too."""
        return self.transcript.split(played_ms)

    @property
    def lane(self) -> Lane:
        return self._lane

    @property
    def ended(self) -> bool:
        return self._ended

    async def planned(self) -> None:
        """Wait until planning has ended (done, failed or cancelled)."""
        await asyncio.wait({self._task})

    def _arm_idle(self) -> None:
        if self._bounds is not None and not self._ended and not self.cancelled:
            self._idle.arm(self._bounds.idle_end_s)

    def _went_idle(self) -> None:
        if not self._ended and not self.cancelled:
            log.info("streamed utterance %s had no text for a while: ended as it stands", self.id)
            self.end()
            if self.on_idle is not None:
                self.on_idle()

    def _planning_ended(self, task: asyncio.Task[None]) -> None:
        self._ready.put_nowait(None)
        if not task.cancelled() and task.exception() is not None:
            for piece in self._submitted:  # an answer that ends in an error stops now, not after its audio
                piece.cancel()

    def _stop(self) -> None:
        self._streamed.stop()
        self._idle.disarm()
        self._task.cancel()
        for piece in self._submitted:
            piece.cancel()

    # -- planning -----------------------------------------------------------------------------------
    async def _plan(self) -> None:
        if self._gate is not None:
            await self._gate()
        if self._prepare is not None:
            self.request = await self._prepare(self.request)
        planned = 0
        silence = Silence()
        while (item := await self._texts.get()) is not None:
            if isinstance(item, Marked):
                self._ready.put_nowait(item)  # after the pieces queued before it
                continue
            await self._account.charge()
            text, whole = item
            if not whole and not any(ch.isalnum() for ch in text):
                continue  # bare punctuation between streamed tokens: nothing to say
            try:
                async for piece in self._source.plan(
                    replace(self.request, text=text), partial(self._grew, whole)
                ):
                    silence.add(piece, self.request.pauses)
                    sink = PieceAudio(asyncio.get_running_loop(), self._lane)
                    self._lane.add(piece, self.request, sink)
                    self._submitted.append(sink)
                    self._ready.put_nowait((piece, sink))
                    planned += 1
            except ProtocolError as exc:
                if whole or exc.code != ErrorCode.EMPTY_TEXT:
                    raise
        await self._account.charge(bounded=False)
        if not planned:
            raise ProtocolError(
                ErrorCode.EMPTY_TEXT, "the text has nothing speakable in it (no letters or numbers to read)"
            )

    def _grew(self, whole: bool, chars: int) -> None:
        """The lexicons made what is spoken ``chars`` longer than what was written: counted (retry hints and
        the speech estimate read ``chars``) and bounded (``StreamBounds.spoken``)."""
        self.chars += chars
        if self._bounds is not None and (refused := self._bounds.spoken(self.chars, whole, self.id)):
            raise refused

    def _planning_failure(self) -> ProtocolError | None:
        """What planning raised, as the error to answer (a bug becomes ``synthesis_failed``)."""
        if not self._task.done() or self._task.cancelled():
            return None
        failure = self._task.exception()
        if failure is None or isinstance(failure, ProtocolError):
            return failure
        log.error("planning failed: %s", type(failure).__name__)
        return ProtocolError(ErrorCode.SYNTHESIS_FAILED, "could not prepare the text for synthesis")

    # -- events out ---------------------------------------------------------------------------------
    async def events(self) -> AsyncGenerator[Event]:
        """The utterance's events in speaking order, ending with one ``Completed`` or ``Failed``."""
        samples = pieces = 0
        rate = self._source.sample_rate
        try:
            while (item := await self._ready.get()) is not None and not self.cancelled:
                if isinstance(item, Marked):
                    yield item
                    continue
                planned, piece = item
                yield PieceStarted(pieces)
                offset_ms = samples * 1000 / rate
                timed = False
                try:
                    async for window in piece.windows():
                        if self.cancelled:
                            break
                        if isinstance(window, Words):
                            timed = True
                            times = shift(window.times, offset_ms)
                            self.transcript.said(times)
                            yield Words(times)
                        else:
                            if self.first_audio_at is None:
                                self.first_audio_at = time.monotonic()
                            samples += window.size
                            yield window
                except Exception as exc:
                    if self.cancelled:
                        break
                    log.error("model call failed: %r", exc)
                    self._stop()
                    yield Failed(
                        ProtocolError(
                            ErrorCode.SYNTHESIS_FAILED,
                            "the speech model failed on this message; later messages are unaffected",
                        )
                    )
                    return
                if self.cancelled:
                    break
                if not timed:
                    self.transcript.said_untimed(planned.text, offset_ms, samples * 1000 / rate)
                yield PieceEnded(pieces)
                pieces += 1
            if self.cancelled:
                yield Failed(self.failure or ProtocolError(ErrorCode.CANCELLED, CANCELLED))
            elif (failure := self._planning_failure()) is not None:
                yield Failed(failure)
            else:
                yield Completed(samples, pieces)
        finally:
            self._stop()  # a consumer that left: nothing more is planned or decoded for it
            self._account.spoke(samples / rate)
