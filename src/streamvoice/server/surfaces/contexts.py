"""A vendor's streaming-TTS WebSocket over the utterance core: contexts of streamed text in, audio out.

ElevenLabs' stream-input, Cartesia's contexts and Deepgram's Speak / Flush have one shape: a connection
carries contexts (one per answer), each fed text as a language model writes it, flushed, ended or
cancelled, and answered with audio, word or character times, and a "done" of the wire's own. This class is
that shape, once; each wire subclasses it to parse its frames (``on_object``) and render the events
in the runtime's one vocabulary (``answer.Renderer``: ``render_audio``, ``render_words``, ``render_completed``
...), each given the wire's own ``Context[S]``; ``error_frame`` says a refused frame in the wire's shape.

What every wire gets from here, with the session protocol's settings:

- contexts answered in the order they were opened, on one listener lane (one voice per connection);
- at most ``max_queued_messages`` contexts open or answering: the one past it is refused in the wire's error
  shape and the connection goes on (never a dropped socket with live contexts on it);
- at most ``max_stream_chars`` of text per context and a context with no text for ``stream_text_timeout_s``
  ended as it stands (``utterance_bounds.StreamBounds``, the same on every surface);
- a frame over ``limits.max_message_bytes`` or not a JSON object is answered in the wire's error shape;
- from the one connection runtime (``connection``): timeouts, the pending-reply cap, the listener slot,
  drain and the upgrade, as on every wire.

Checked by ``pytest tests/test_contexts.py`` and the per-wire tests.
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.websockets import WebSocket

from streamvoice.protocol import ErrorCode, ProtocolError, check_text, parse_json_object
from streamvoice.server.core.events import Completed
from streamvoice.server.core.requests import Prepare, ResolvedRequest
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces import upgrade
from streamvoice.server.surfaces.answer import Answer
from streamvoice.server.surfaces.connection import Connection
from streamvoice.server.surfaces.websocket import WebSocketTransport, audio_frames

log = logging.getLogger("streamvoice.vendor")

Frame = str | bytes
CLOSED_IDS = 1024  # closed contexts remembered per connection, so a late message to one is told so


def context_id(raw: object, field: str = "context_id") -> str | None:
    """A client's context id as text (a number is taken as written; at most 128 characters), None when
    absent; anything else is ``invalid_field`` (an object was echoed back as its Python repr)."""
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise ProtocolError(ErrorCode.INVALID_FIELD, f'"{field}" must be a string')
    return str(raw)[:128]


@dataclass(eq=False)
class Context[S](Answer):
    """One answer on a vendor connection: its id on the wire, its request, its utterance, and the wire's own
    typed state for it (``S``: a flush counter, pending characters ...; ``ContextSocket.new_state``)."""

    wire: S = field(kw_only=True)
    spoken: bool = field(default=False, kw_only=True)  # has had words (not only the keep-alive space)

    @property
    def cid(self) -> str:
        """The id on the wire (a context always has one)."""
        return self.id or ""

    @property
    def taking_text(self) -> bool:
        return not self.utterance.ended and not self.utterance.cancelled


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class ContextSocket[S](Connection[Frame, Context[S]]):
    name = "vendor"
    # ElevenLabs: a context that gets words while an older one, already closed, is still speaking takes
    # the voice (the older is cancelled). Its clients close a context to interrupt it and open the next.
    newest_takes_over = False

    def __init__(self, ws: WebSocket, service: SpeechService, connection_id: str) -> None:
        transport = WebSocketTransport.of(ws, service, f"{self.name}={connection_id}")
        super().__init__(transport, service, connection_id)
        self.ws = ws
        self.open: dict[str, Context[S]] = {}  # taking text
        # ids of the last contexts closed (bounded: CLOSED_IDS), oldest first, and why: "cancelled" or "ended"
        self.closed: dict[str, str] = {}

    # -- the wire's side ----------------------------------------------------------------------------
    def new_state(self) -> S:
        """A new context's state of the wire's own."""
        raise NotImplementedError

    async def on_object(self, obj: dict[str, Any]) -> bool:
        """One parsed client frame; True when the client asked to close (after what is queued)."""
        raise NotImplementedError

    def error_frame(self, error: ProtocolError, context_id: str | None) -> Frame | None:
        raise NotImplementedError

    def revoked_frame(self, error: ProtocolError) -> Frame | None:
        return self.error_frame(error, None)

    # -- the runtime's side -------------------------------------------------------------------------
    async def on_frame(self, frame: Frame) -> bool:
        return await self.on_object(parse_json_object(frame, self.service.config.limits))

    def refused(self, error: ProtocolError) -> None:
        self.notice(self.error_frame(error, error.id))

    def render_audio(self, answer: Context[S], data: bytes, samples: int) -> list[Frame]:
        return list(audio_frames(data))

    def render_cancelled(self, answer: Context[S], error: ProtocolError) -> list[Frame]:
        return []  # the vendors answer a cancelled context with nothing (or say so in their own frame)

    def render_failed(self, answer: Context[S], error: ProtocolError) -> list[Frame]:
        """An empty context is answered done, as the vendors do; any other failure in the wire's error shape,
        counted."""
        if error.code == ErrorCode.EMPTY_TEXT:
            return self.render_completed(answer, Completed(samples=0, pieces=0))
        self.count_error(error)
        return _frames(self.error_frame(error, answer.id))

    def finished(self, answer: Context[S]) -> None:
        if self.open.get(answer.cid) is answer:
            del self.open[answer.cid]

    # -- contexts -----------------------------------------------------------------------------------
    def send(self, frame: Frame | None) -> None:
        """Queue a frame behind the answers already queued."""
        self.reply(frame)

    def refuse(self, error: ProtocolError, context_id: str | None) -> None:
        """Answer a refused frame or context now, not behind the answers queued."""
        self.count_error(error)
        self.notice(self.error_frame(error, context_id))

    def start(self, cid: str, request: ResolvedRequest, prepare: Prepare | None = None) -> Context[S] | None:
        """Open a context (or answer why not, in the wire's shape, and return None); ``prepare``: what its
        request still needs from the store (its dictionaries), fetched before planning, not by the reader."""
        refused = self.refusal(
            "contexts", "close or cancel one, or wait for one to finish, before opening another"
        )
        if refused is not None:
            self.refuse(refused, cid)
            return None
        try:
            utterance = self.begin(request, cid, prepare=prepare).utterance
        except ProtocolError as busy:
            self.refuse(busy, cid)
            return None
        ctx = Context(cid, request, utterance, time.monotonic(), wire=self.new_state())
        self.open[cid] = ctx
        utterance.on_idle = lambda: self._close(ctx)  # no text for a while: ended as it stood
        return self.open_answer(ctx)

    def append(self, ctx: Context[S], text: str) -> None:
        """Text for a context (the utterance bounds it: ``StreamBounds``; past its characters it ends)."""
        check_text(text, self.service.config.limits, ctx.id, speakable=False)
        if not ctx.spoken and text.strip():
            ctx.spoken = True
            if self.newest_takes_over:  # by context, not by id: a reused id names the new one too
                older = [
                    c
                    for c in self.answering
                    if c is not ctx and not c.taking_text and not c.utterance.cancelled
                ]
                self.utterances.cancel_these([c.utterance for c in older])
                for c in older:
                    self._close(c)
        try:
            ctx.utterance.append(text)
        except ProtocolError:
            self._close(ctx)
            raise

    def flush(self, ctx: Context[S]) -> None:
        ctx.utterance.flush()

    def end(self, ctx: Context[S]) -> None:
        """No more text for this context: what it has is spoken, then it is answered done."""
        ctx.utterance.end()
        self._close(ctx)

    def cancel(self, target: str | None = None) -> list[Context[S]]:
        """Stop the context with this id (None: every one); those cancelled."""
        cancelled = super().cancel(target)
        for ctx in cancelled:
            self._close(ctx)
        return cancelled

    def _close(self, ctx: Context[S]) -> None:
        if self.open.get(ctx.cid) is ctx:
            del self.open[ctx.cid]
        self.closed[ctx.cid] = "cancelled" if ctx.utterance.cancelled else "ended"
        if len(self.closed) > CLOSED_IDS:
            del self.closed[next(iter(self.closed))]


def _frames(frame: Frame | None) -> list[Frame]:
    return [] if frame is None else [frame]


async def serve(
    ws: WebSocket,
    make: Callable[[WebSocket, SpeechService, str], ContextSocket[Any]],
    refusal: Callable[[ProtocolError], Frame],
    browser: upgrade.BrowserKey,
) -> None:
    """A vendor socket's life: ``upgrade.serve``, the one upgrade of every WebSocket wire, with where the
    vendor's browser clients put their key."""
    await upgrade.serve(ws, make, refusal, browser=browser)
