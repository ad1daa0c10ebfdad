"""Deepgram's Aura text-to-speech API on the speech server, so its SDK and the frameworks' Deepgram plugins
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
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from streamvoice.protocol import (
    SAMPLE_RATES,
    ErrorCode,
    ProtocolError,
    check_text,
    required_text,
    validate_speed,
    whole_number,
)
from streamvoice.server.core.requests import ResolvedRequest, SessionDefaults
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.contexts import Context, ContextSocket, Frame, serve
from streamvoice.server.surfaces.http_answer import audio_answer
from streamvoice.server.surfaces.upgrade import BrowserKey
from streamvoice.server.surfaces.vendor_voices import vendor_language, vendor_voices

VENDOR = "Deepgram"
DEFAULT_MODEL = "aura-2-thalia-en"
BROWSER_KEY = BrowserKey(subprotocols=("token", "bearer"))  # the SDKs offer ["token", KEY]
WS_ENCODINGS = {"linear16": "pcm", "mulaw": "ulaw", "alaw": "alaw"}
HTTP_ENCODINGS = {**WS_ENCODINGS, "mp3": "mp3", "opus": "opus", "flac": "flac", "aac": "aac"}
MEDIA = {
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "flac": "audio/flac",
    "aac": "audio/aac",
    "wav": "audio/wav",
}


def _bad(message: str, param: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_FIELD, message, param=param)


def _rate(query: Mapping[str, str], default: int) -> int:
    raw = query.get("sample_rate")
    if raw is None:
        return default
    rate = whole_number(raw)
    if rate is None or rate not in SAMPLE_RATES:
        raise _bad(f"sample_rate must be one of {', '.join(map(str, SAMPLE_RATES))}", "sample_rate")
    return rate


def _lang(model: str) -> str | None:
    """Aura names end in their language ("aura-2-celeste-es"); ours carry their own."""
    return vendor_language(model.rsplit("-", 1)[-1], keep_unknown=False) if model.startswith("aura") else None


def resolve(
    service: SpeechService, query: Mapping[str, str], websocket: bool, text: str = ""
) -> tuple[ResolvedRequest, bool]:
    """The request a connection's (or a call's) query describes; and whether to wrap it in WAV."""
    encodings = WS_ENCODINGS if websocket else HTTP_ENCODINGS
    encoding = query.get("encoding") or ("linear16" if websocket else "mp3")
    if encoding not in encodings:
        raise _bad(f"encoding must be one of {', '.join(encodings)}", "encoding")
    fmt = encodings[encoding]
    container = query.get("container") or ("wav" if encoding == "linear16" and not websocket else "none")
    if container not in ("none", "wav", "ogg"):
        raise _bad("container must be none, wav or ogg", "container")
    if (container == "ogg" and fmt != "opus") or (
        container == "wav" and fmt in ("mp3", "opus", "flac", "aac")
    ):
        # the answer would be in another container than asked (encoding=mp3&container=ogg was audio/mpeg)
        raise _bad(
            f"container {container} does not carry {encoding}: ogg carries opus, wav linear16", "container"
        )
    wav = fmt == "pcm" and container == "wav"
    default_rate = (
        8000 if fmt in ("ulaw", "alaw") else 22050 if fmt == "mp3" else 48000 if fmt == "opus" else 24000
    )
    rate = _rate(query, default_rate)
    model = query.get("model") or DEFAULT_MODEL
    voice = vendor_voices(service).resolve(model, VENDOR)
    speed_raw = query.get("speed")
    try:
        speed = validate_speed(float(speed_raw)) if speed_raw else None
    except ValueError:
        raise _bad("speed must be a number from 0.5 to 2.0", "speed") from None
    lang = _lang(model) if voice != model else None
    resolved = service.requests.resolve(
        SessionDefaults(), voice, speed, "wav" if wav else fmt, lang, sample_rate=rate, ssml=False, text=text
    )
    return resolved, wav


def warning(error: ProtocolError) -> str:
    return json.dumps({"type": "Warning", "description": error.message, "code": str(error.code).upper()})


class DeepgramSocket(ContextSocket):
    name = "deepgram"

    def __init__(self, ws: WebSocket, service: SpeechService, connection_id: str) -> None:
        super().__init__(ws, service, connection_id)
        self.model = ws.query_params.get("model") or DEFAULT_MODEL
        self.request, _ = resolve(service, ws.query_params, websocket=True)
        self.current: Context | None = None
        self.flushes = 0
        self.request_id = str(uuid.uuid4())
        self.send(
            json.dumps(
                {
                    "type": "Metadata",
                    "request_id": self.request_id,
                    "model_name": self.model,
                    "model_version": "kokoro-82m-v1.0",
                    "model_uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, "kokoro-82m-v1.0")),
                }
            )
        )

    async def on_object(self, obj: dict[str, Any]) -> bool:
        kind = obj.get("type")
        match kind:
            case "Speak":
                text = required_text(obj)
                ctx = self.current if self.current is not None and self.current.taking_text else None
                if ctx is None:
                    ctx = self.start(f"{self.flushes}", self.request)
                    if ctx is None:
                        return False
                    self.current = ctx
                self.append(ctx, text)
            case "Flush":
                ctx, self.current = self.current, None
                sequence = self.flushes
                self.flushes += 1
                if ctx is not None and ctx.taking_text:
                    ctx.wire["sequence"] = sequence
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

    def done_frame(self, ctx: Context) -> Frame | None:
        if "sequence" not in ctx.wire:
            return None  # ended by the server (its text stopped, or passed the cap): no Flush to answer
        return json.dumps({"type": "Flushed", "sequence_id": ctx.wire["sequence"]})

    def failed_frame(self, ctx: Context, error: ProtocolError) -> Frame | None:
        return json.dumps({"type": "Error", "description": error.message, "code": str(error.code).upper()})

    def error_frame(self, error: ProtocolError, context_id: str | None) -> Frame | None:
        return warning(error)


async def websocket(ws: WebSocket) -> None:
    await serve(ws, DeepgramSocket, warning, BROWSER_KEY)


def error_shape(error: ProtocolError) -> dict[str, Any]:
    return {"err_code": str(error.code).upper(), "err_msg": error.message, "request_id": str(uuid.uuid4())}


def http_error(error: ProtocolError, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse(error_shape(error), status_code=error.http_status, headers=headers)


async def speak(request: Request) -> Response:
    def parse(obj: dict[str, Any], service: SpeechService) -> tuple[ResolvedRequest, bool]:
        text = required_text(obj)
        check_text(text, service.config.limits)
        return resolve(service, request.query_params, websocket=False, text=text)

    headers = {
        "dg-request-id": str(uuid.uuid4()),
        "dg-model-name": request.query_params.get("model") or DEFAULT_MODEL,
    }
    return await audio_answer(request, parse, _media, http_error, headers)


def _media(resolved: ResolvedRequest) -> str:
    return MEDIA.get(resolved.format, "application/octet-stream")


ROUTES = [
    WebSocketRoute("/v1/speak", websocket),
    Route("/v1/speak", speak, methods=["POST"]),
]
