"""One bidirectional speech session (``WS /invocations-bidirectional-stream``): many messages in, audio and
control frames out, strictly in order, on the one connection runtime (``surfaces.connection``).

A message's pieces are planned chunk by chunk and each goes to the scheduler as soon as it is planned, so
piece N+1 is synthesised while piece N is on the wire; every message gets exactly one ``synthesis_complete``
or one ``error``, and audio never interleaves across messages. Problems with one frame are answered in order
(an ``error`` with the frame's ``sequence``) and the session goes on. Checked by
``pytest tests/test_session.py``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket

from streamvoice.engine.alignment import WordTime
from streamvoice.protocol import (
    WS_PATH,
    Ack,
    Append,
    Cancel,
    Close,
    Configure,
    End,
    ErrorCode,
    ErrorEvent,
    Flush,
    ProtocolError,
    Synthesize,
    decode_client_frame,
    encode_event,
)
from streamvoice.server.core.events import Completed
from streamvoice.server.core.requests import SessionDefaults
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces import upgrade
from streamvoice.server.surfaces.connection import Connection
from streamvoice.server.surfaces.guards import caller
from streamvoice.server.surfaces.session import message as rendered
from streamvoice.server.surfaces.session.configure import configured, configured_body
from streamvoice.server.surfaces.session.message import Message, MessageState, refusal
from streamvoice.server.surfaces.session.stream import StreamedMessages
from streamvoice.server.surfaces.websocket import WebSocketTransport

log = logging.getLogger("streamvoice.session")

Frame = str | bytes


class BidiSession(Connection[Frame, Message]):
    name = "session"

    def __init__(self, ws: WebSocket, service: SpeechService, session_id: str) -> None:
        super().__init__(WebSocketTransport.of(ws, service, f"session={session_id}"), service, session_id)
        self.session_id = session_id
        self._caller = caller(ws)  # whose named lexicons ``configure`` keeps and reads
        self.defaults = SessionDefaults()
        self.streams = StreamedMessages()
        self._sequence = 0

    # -- reading ------------------------------------------------------------------------------------
    async def on_frame(self, frame: Frame) -> bool:
        try:
            msg = decode_client_frame(frame, self.service.config.limits)
        except ProtocolError as exc:
            self._reply_error(exc, self._next_sequence())
            return False
        match msg:
            case Synthesize():
                await self._accept(msg)
            case Append() | Flush() | End():
                self._stream(msg)
            case Configure():
                await self._configure(msg)
            case Cancel(id=target, played_ms=played_ms):
                # No id: everything open (barge-in); an id: that message only, the rest goes on.
                cut = self.cut(target, played_ms)
                ids = [answer.id for answer in cut.cancelled]
                detail = {
                    "ids": ids,
                    "count": len(ids),
                    "played_ms": cut.played_ms,
                    "heard": rendered.heard(cut),
                }
                self.reply(encode_event(Ack("cancelled", detail)))
            case Close():
                self.streams.end_all()
                self.reply(encode_event(Ack("session_closed", {"session": self.session_id})))
                return True
        return False

    def refused(self, error: ProtocolError) -> None:
        self._reply_error(error, self._next_sequence(), counted=True)

    def closing_frame(self, code: ErrorCode, message: str) -> Frame | None:
        return encode_event(ErrorEvent(str(code), message))

    def _next_sequence(self) -> int:
        seq = self._sequence
        self._sequence += 1
        return seq

    def _reply_error(self, exc: ProtocolError, sequence: int | None, counted: bool = False) -> None:
        if not counted:
            self.count_error(exc)
        self.reply(encode_event(ErrorEvent(str(exc.code), exc.message, exc.id, sequence)))

    async def _accept(self, msg: Synthesize) -> None:
        sequence = self._next_sequence()
        limit = self.service.config.max_queued_messages
        if (refused := refusal(self.draining, len(self.answering), limit, msg.id)) is not None:
            self._reply_error(refused, sequence)
            return
        try:
            request = self.service.requests.message(msg, self.defaults)
        except ProtocolError as exc:
            self._reply_error(exc, sequence)
            return
        try:
            opened = self.begin(request, msg.id)
        except ProtocolError as busy:
            self._reply_error(busy.naming(id=msg.id), sequence)
            return
        if opened.queued:  # told now: it waits for a listener slot
            detail = {
                "id": msg.id,
                "sequence": sequence,
                "position": opened.position,
                "max_wait_s": opened.max_wait_s,
            }
            self.reply(encode_event(Ack("queued", detail)))
        utterance = opened.utterance
        message = Message(msg.id, request, utterance, time.monotonic(), sequence=sequence)
        if msg.stream:
            try:
                self.streams.start(message, msg.text)
            except ProtocolError as exc:  # the opening text passes the stream's whole cap: its answer
                utterance.cancel()
                self.utterances.done(utterance)
                if not self.answering:
                    self.seat.idle()
                self._reply_error(exc.naming(id=msg.id), sequence)
                return
        else:
            utterance.say()
        self.open_answer(message)

    def _stream(self, msg: Append | Flush | End) -> None:
        """Text for a streamed message, a flush or its end; a problem is answered without a sequence."""
        try:
            match msg:
                case Append(text=text, id=uid):
                    self.streams.append(uid, text)
                case Flush(id=uid):
                    self.streams.flush(uid)
                case End(id=uid):
                    self.streams.end(uid)
        except ProtocolError as exc:
            self._reply_error(exc, None)

    async def _configure(self, msg: Configure) -> None:
        """New defaults for the messages after it. The one read that waits on the store (a lexicon kept by
        name): every later message is resolved against these defaults, so none may be read past it first."""
        pauses = self.service.config.pauses
        try:
            if msg.lexicon_name is not None and msg.lexicon is None:  # the caller's kept lexicon, by name
                kept = await self.service.dictionaries.kept_lexicon(self._caller, msg.lexicon_name)
                msg = replace(msg, lexicon=kept)
            candidate = configured(self.defaults, msg, pauses)
            self.service.requests.resolve(candidate)
            if msg.lexicon_name is not None and msg.lexicon is not None:
                await self.service.dictionaries.keep_lexicon(self._caller, msg.lexicon_name, msg.lexicon)
        except ProtocolError as exc:
            self._reply_error(exc, None)
            return
        self.defaults = candidate
        body = configured_body(candidate, pauses)
        self.reply(encode_event(Ack("configured", {**body, "lexicon_name": msg.lexicon_name})))

    def cancel(self, target: str | None = None) -> list[Message]:
        cancelled = super().cancel(target)
        for message in cancelled:
            message.advance(MessageState.CANCELLED)
        return cancelled

    def handed_over(self, message: Message) -> Frame | None:
        position, max_wait_s = self.seat.waiting()
        detail = {
            "id": message.id,
            "sequence": message.sequence,
            "position": position,
            "max_wait_s": max_wait_s,
            "handed_over": True,  # its turn was over: the slot went to a caller waiting; it resumes after
        }
        return encode_event(Ack("queued", detail))

    # -- rendering ----------------------------------------------------------------------------------
    def render_started(self, message: Message, index: int) -> list[Frame]:
        return rendered.started(message)

    def render_words(self, message: Message, times: list[WordTime]) -> list[Frame]:
        return rendered.words(message, times)

    def render_audio(self, message: Message, data: bytes, samples: int) -> list[Frame]:
        return rendered.audio(message, data)

    def render_completed(self, message: Message, done: Completed) -> list[Frame]:
        return rendered.completed(message, done, self.service.sample_rate)

    def render_failed(self, message: Message, error: ProtocolError) -> list[Frame]:
        frames, told = rendered.failed(message, error)
        if told is not None:
            self.count_error(told)
        return frames

    def finished(self, message: Message) -> None:
        message.answered.set()
        self.streams.forget(message)


async def bidi(ws: WebSocket) -> None:
    def session_id(ws: WebSocket) -> str | None:
        return ws.headers.get("x-amzn-sagemaker-session-id")

    await upgrade.serve(ws, BidiSession, _refusal, session_id)


def _refusal(error: ProtocolError) -> Frame:
    return encode_event(ErrorEvent(str(error.code), error.message))


ROUTES = [WebSocketRoute(WS_PATH, bidi)]
