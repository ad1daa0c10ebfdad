"""What Deepgram's two TTS wires share: a connection's (or a call's) query as our request, the REST call,
and Deepgram's error shapes. Checked by ``pytest tests/test_deepgram.py tests/test_deepgram_flux.py``."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from streamvoice.asgi import header_value, shaped_errors
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
from streamvoice.server.surfaces.http_answer import audio_answer
from streamvoice.server.surfaces.upgrade import BrowserKey
from streamvoice.server.surfaces.vendor_voices import vendor_language, vendor_voices

VENDOR = "Deepgram"
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
MODEL_VERSION = "kokoro-82m-v1.0"
MODEL_UUID = str(uuid.uuid5(uuid.NAMESPACE_URL, MODEL_VERSION))

Speed = Callable[[str], float]  # a query's speed as a number, or the ProtocolError that says why not


def bad(message: str, param: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_FIELD, message, param=param)


def aura_speed(raw: str) -> float:
    try:
        return validate_speed(float(raw))
    except ValueError:
        raise bad("speed must be a number from 0.5 to 2.0", "speed") from None


def sample_rate(query: Mapping[str, str], default: int) -> int:
    raw = query.get("sample_rate")
    if raw is None:
        return default
    rate = whole_number(raw)
    if rate is None or rate not in SAMPLE_RATES:
        raise bad(f"sample_rate must be one of {', '.join(map(str, SAMPLE_RATES))}", "sample_rate")
    return rate


def _lang(model: str) -> str | None:
    """Deepgram's names end in their language ("aura-2-celeste-es", "flux-alexis-en"); ours carry their own."""
    if not model.startswith(("aura", "flux")):
        return None
    return vendor_language(model.rsplit("-", 1)[-1], keep_unknown=False)


def resolve(
    service: SpeechService,
    query: Mapping[str, str],
    websocket: bool,
    default_model: str,
    speed_of: Speed = aura_speed,
    text: str = "",
) -> tuple[ResolvedRequest, bool]:
    """The request a connection's (or a call's) query describes; and whether to wrap it in WAV."""
    encodings = WS_ENCODINGS if websocket else HTTP_ENCODINGS
    encoding = query.get("encoding") or ("linear16" if websocket else "mp3")
    if encoding not in encodings:
        raise bad(f"encoding must be one of {', '.join(encodings)}", "encoding")
    fmt = encodings[encoding]
    container = query.get("container") or ("wav" if encoding == "linear16" and not websocket else "none")
    if container not in ("none", "wav", "ogg"):
        raise bad("container must be none, wav or ogg", "container")
    if (container == "ogg" and fmt != "opus") or (
        container == "wav" and fmt in ("mp3", "opus", "flac", "aac")
    ):
        # the answer would be in another container than asked (encoding=mp3&container=ogg was audio/mpeg)
        raise bad(
            f"container {container} does not carry {encoding}: ogg carries opus, wav linear16", "container"
        )
    wav = fmt == "pcm" and container == "wav"
    default_rate = (
        8000 if fmt in ("ulaw", "alaw") else 22050 if fmt == "mp3" else 48000 if fmt == "opus" else 24000
    )
    rate = sample_rate(query, default_rate)
    model = query.get("model") or default_model
    voice = vendor_voices(service).resolve(model, VENDOR)
    speed_raw = query.get("speed")
    speed = speed_of(speed_raw) if speed_raw else None
    lang = _lang(model) if voice != model else None
    resolved = service.requests.resolve(
        SessionDefaults(), voice, speed, "wav" if wav else fmt, lang, sample_rate=rate, ssml=False, text=text
    )
    return resolved, wav


def warning(error: ProtocolError) -> str:
    return json.dumps({"type": "Warning", "description": error.message, "code": str(error.code).upper()})


def error_shape(error: ProtocolError) -> dict[str, Any]:
    return {"err_code": str(error.code).upper(), "err_msg": error.message, "request_id": str(uuid.uuid4())}


http_error = shaped_errors(error_shape)


def speak_call(default_model: str, speed_of: Speed) -> Callable[[Request], Any]:
    """``POST /v1/speak`` or ``/v2/speak``: ``{"text"}`` in, the audio out."""

    async def speak(request: Request) -> Response:
        async def parse(obj: dict[str, Any], service: SpeechService) -> tuple[ResolvedRequest, bool]:
            text = required_text(obj)
            check_text(text, service.config.limits)
            return resolve(service, request.query_params, False, default_model, speed_of, text=text)

        headers = {
            "dg-request-id": str(uuid.uuid4()),
            "dg-model-name": header_value(request.query_params.get("model") or default_model),
        }
        return await audio_answer(request, parse, _media, http_error, headers)

    return speak


def _media(resolved: ResolvedRequest) -> str:
    return MEDIA.get(resolved.format, "application/octet-stream")
