"""Deepgram's Aura text-to-speech API (``/v1/speak``) on the speech server, so its SDK and the frameworks' Deepgram plugins
reach Kokoro by changing their base URL.

- ``WS /v1/speak?model=&encoding=&sample_rate=``: ``{"type": "Speak", "text"}`` as text arrives (spoken as
  the server's chunker cuts it, before any flush), ``{"type": "Flush"}`` ends the answer so far (its audio,
  then ``{"type": "Flushed", "sequence_id"}``), ``{"type": "Clear"}`` stops everything (``Cleared``),
  ``{"type": "Close"}`` closes. Audio is binary frames; ``Metadata`` opens the connection; a refused
  message is a ``Warning``, a failed synthesis an ``Error``.
- ``POST /v1/speak?model=&encoding=&sample_rate=&container=``: ``{"text"}`` in, the audio out.

The voice is ``model`` (ours, or a Deepgram name through the vendor voice map). Encodings ``linear16``,
``mulaw``, ``alaw`` (and ``mp3``, ``opus``, ``flac``, ``aac`` over HTTP). The key goes in
``Authorization: Token`` (or ``Bearer``) and carries the server's AUTH_TOKEN. HTTP errors are Deepgram's
``{"err_code", "err_msg", "request_id"}``. Checked by ``pytest tests/test_deepgram.py``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from streamvoice.protocol import ErrorCode, ProtocolError, required_text
from streamvoice.server.core.events import Completed
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.contexts import Context, Frame, serve
from streamvoice.server.surfaces.deepgram.request import (
    BROWSER_KEY,
    MODEL_UUID,
    MODEL_VERSION,
    aura_speed,
    resolve,
    speak_call,
    warning,
)
from streamvoice.server.surfaces.deepgram.turns import TurnSocket

DEFAULT_MODEL = "aura-2-thalia-en"


@dataclass
class AuraContext:
    """What Deepgram's v1 wire keeps per context: the ``Flush`` that ended it, which its ``Flushed`` names."""

    sequence: int | None = None  # None: ended by the server (its text stopped), no Flush to answer


class DeepgramSocket(TurnSocket[AuraContext]):
    name = "deepgram"

    def new_state(self) -> AuraContext:
        return AuraContext()

    def __init__(self, ws: WebSocket, service: SpeechService, connection_id: str) -> None:
        super().__init__(ws, service, connection_id)
        self.model = ws.query_params.get("model") or DEFAULT_MODEL
        self.request, _ = resolve(service, ws.query_params, True, DEFAULT_MODEL)
        self.flushes = 0
        self.request_id = str(uuid.uuid4())
        self.send(
            json.dumps(
                {
                    "type": "Metadata",
                    "request_id": self.request_id,
                    "model_name": self.model,
                    "model_version": MODEL_VERSION,
                    "model_uuid": MODEL_UUID,
                }
            )
        )

    async def on_object(self, obj: dict[str, Any]) -> bool:
        kind = obj.get("type")
        match kind:
            case "Speak":
                self.speak(required_text(obj), self.request, lambda: f"{self.flushes}")
            case "Flush":
                ctx = self.flushed()
                sequence = self.flushes
                self.flushes += 1
                if ctx is not None:
                    ctx.wire.sequence = sequence
                    self.end(ctx)
                else:
                    self.send(json.dumps({"type": "Flushed", "sequence_id": sequence}))
            case "Clear":
                self.cancel()
                self.current = None
                self.send(json.dumps({"type": "Cleared", "sequence_id": self.flushes}))
            case "Close":
                self.cancel()
                return True
            case _:
                raise ProtocolError(
                    ErrorCode.UNKNOWN_TYPE,
                    f'"type" {str(kind)[:32]!r} is not one of Speak, Flush, Clear, Close',
                )
        return False

    def render_completed(self, ctx: Context[AuraContext], done: Completed) -> list[Frame]:
        if ctx.wire.sequence is None:
            return []  # ended by the server (its text stopped, or passed the cap): no Flush to answer
        return [json.dumps({"type": "Flushed", "sequence_id": ctx.wire.sequence})]

    def render_failed(self, ctx: Context[AuraContext], error: ProtocolError) -> list[Frame]:
        """A turn that failed is Deepgram's ``Error``; an empty one is answered as the other vendors do."""
        if error.code == ErrorCode.EMPTY_TEXT:
            return super().render_failed(ctx, error)
        self.count_error(error)
        return [json.dumps({"type": "Error", "description": error.message, "code": str(error.code).upper()})]

    def error_frame(self, error: ProtocolError, context_id: str | None) -> Frame | None:
        return warning(error)


async def websocket(ws: WebSocket) -> None:
    await serve(ws, DeepgramSocket, warning, BROWSER_KEY)


ROUTES = [
    WebSocketRoute("/v1/speak", websocket),
    Route("/v1/speak", speak_call(DEFAULT_MODEL, aura_speed), methods=["POST"]),
]
