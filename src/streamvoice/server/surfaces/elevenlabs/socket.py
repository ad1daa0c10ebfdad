"""ElevenLabs' ``stream-input`` and ``multi-stream-input`` sockets on the one context runtime
(``surfaces.contexts``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from starlette.websockets import WebSocket

from streamvoice.engine.alignment import WordTime
from streamvoice.protocol import (
    ErrorCode,
    ProtocolError,
    decode_control_frame,
    text_field,
)
from streamvoice.server.core.events import Completed
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.contexts import Context, ContextSocket, Frame, b64, context_id, serve
from streamvoice.server.surfaces.elevenlabs.alignment import Char, Spelled, message_chars, ws_alignment
from streamvoice.server.surfaces.elevenlabs.dictionaries import dictionaries_for
from streamvoice.server.surfaces.elevenlabs.request import resolve, voice_speed
from streamvoice.server.surfaces.guards import caller
from streamvoice.server.surfaces.upgrade import BrowserKey


def ws_error(error: ProtocolError, context_id: str | None) -> str:
    body: dict[str, Any] = {"message": error.message, "error": str(error.code), "code": 1008}
    if context_id is not None:
        body["contextId"] = context_id
    return json.dumps(body)


def first_message_key(frame: Frame) -> object:
    """The key a browser client puts in its first message (``xi_api_key``)."""
    obj = decode_control_frame(frame)
    return obj.get("xi_api_key") if obj is not None else None


BROWSER_KEY = BrowserKey(first_message=first_message_key)


@dataclass
class ElevenLabsContext:
    """What ElevenLabs' wire keeps per context: the characters whose times are not sent yet."""

    pending: list[Char] = field(default_factory=list)
    spelled: Spelled = field(default_factory=Spelled)  # its words as characters, piece by piece
    in_word: bool = False  # the last message ended inside a word


class ElevenLabsSocket(ContextSocket[ElevenLabsContext]):
    name = "elevenlabs"
    newest_takes_over = True

    def __init__(self, ws: WebSocket, service: SpeechService, connection_id: str, multi: bool) -> None:
        super().__init__(ws, service, connection_id)
        self.multi = multi
        self.voice_id = ws.path_params.get("voice_id", "")
        self.query = ws.query_params
        self.request = resolve(
            service, self.voice_id, self.query.get("output_format"), lang=self.query.get("language_code")
        )  # checked before the accept: a bad format or voice is a refused upgrade's reason
        self._single_done = False
        self._caller = caller(ws)  # whose dictionaries its locators name (a first message's key: below)
        self._key_seen = False

    def new_state(self) -> ElevenLabsContext:
        return ElevenLabsContext()

    async def on_object(self, obj: dict[str, Any]) -> bool:
        if not self._key_seen:
            self._key_seen = True
            if isinstance(key := obj.get("xi_api_key"), str) and key:
                self._caller = caller(self.ws, key)
        cid = (context_id(obj.get("context_id", obj.get("contextId"))) if self.multi else "0") or "default"
        if obj.get("close_socket") is True:
            for open_ctx in list(self.open.values()):
                self.end(open_ctx)
            return True
        ctx = self.open.get(cid)
        if obj.get("close_context") is True:
            if ctx is not None:
                self.end(ctx)
            return False
        text = text_field(obj, "text", cid)
        if text is None and obj.get("flush") is not True:
            raise ProtocolError(
                ErrorCode.MISSING_TEXT,
                'send {"text": "..."} (or "flush", "close_context", "close_socket")',
                cid,
            )
        if ctx is None:
            if not self.multi and self._single_done:
                raise ProtocolError(
                    ErrorCode.INVALID_MESSAGE, "this stream has ended; open a new connection for more", cid
                )
            if text == "":
                return False  # a keep-alive for a context not open: nothing to do
            speed = voice_speed(obj.get("voice_settings"))
            request = self.request if speed is None else replace(self.request, speed=speed)
            try:  # the context's first message names its dictionaries: fetched before planning
                named = obj.get("pronunciation_dictionary_locators")
                prepare = dictionaries_for(self.service, self._caller, named)
            except ProtocolError as exc:
                raise exc.naming(id=cid) from None
            ctx = self.start(cid, request, prepare)
            if ctx is None:
                return False
            self._single_done = not self.multi
        if text:
            self.append(ctx, text)
        if obj.get("flush") is True:
            self.flush(ctx)
        if text == "" and not self.multi:
            self.end(ctx)  # stream-input: the empty text ends the stream (multi-stream: a keep-alive)
        return False

    def render_words(self, ctx: Context[ElevenLabsContext], times: list[WordTime]) -> list[Frame]:
        ctx.wire.pending += ctx.wire.spelled(times)  # told with the audio that speaks them (``render_audio``)
        return []

    def render_audio(self, ctx: Context[ElevenLabsContext], data: bytes, samples: int) -> list[Frame]:
        rate = self.service.sample_rate
        start_ms = ctx.sent_samples * 1000 / rate
        end_ms = start_ms + samples * 1000 / rate
        now, ctx.wire.pending = message_chars(ctx.wire.pending, end_ms, ctx.wire.in_word)
        ctx.wire.in_word = bool(now) and now[-1].char != " "
        alignment = ws_alignment(now, start_ms, end_ms)  # on every message: the client's clock moves by it
        body: dict[str, Any] = {
            "audio": b64(data),
            "isFinal": None,
            "alignment": alignment,
            "normalizedAlignment": alignment,
        }
        if self.multi:
            body["contextId"] = ctx.id
        return [json.dumps(body)]

    def render_completed(self, ctx: Context[ElevenLabsContext], done: Completed) -> list[Frame]:
        return [self._final(ctx)]

    def render_cancelled(self, ctx: Context[ElevenLabsContext], error: ProtocolError) -> list[Frame]:
        return [self._final(ctx)]  # a closed (cancelled) context ends as a finished one does

    def _final(self, ctx: Context[ElevenLabsContext]) -> Frame:
        body: dict[str, Any] = {"isFinal": True}
        if self.multi:
            body["contextId"] = ctx.id
        return json.dumps(body)

    def error_frame(self, error: ProtocolError, context_id: str | None) -> Frame | None:
        return ws_error(error, context_id if self.multi else None)

    def after_answer(self, answer: Context[ElevenLabsContext]) -> bool:
        return not self.multi


async def stream_input(ws: WebSocket) -> None:
    await serve(
        ws, lambda ws, service, cid: ElevenLabsSocket(ws, service, cid, multi=False), _refusal, BROWSER_KEY
    )


async def multi_stream_input(ws: WebSocket) -> None:
    await serve(
        ws, lambda ws, service, cid: ElevenLabsSocket(ws, service, cid, multi=True), _refusal, BROWSER_KEY
    )


def _refusal(error: ProtocolError) -> Frame:
    return ws_error(error, None)
