"""OpenAI's speech API on the speech server, so adopting it is a base-URL change.

- ``POST /v1/audio/speech``: OpenAI's request body; the answer streams one chunk per decoded window
  (``stream_format: "audio"``) or as SSE ``speech.audio.delta`` / ``speech.audio.done`` events
  (``stream_format: "sse"``; chosen by the body field only, since the OpenAI SDK sends
  ``Accept: application/octet-stream`` for both).
- ``GET /v1/audio/voices`` and ``GET /v1/models``: what OpenAI-compatible apps list in their pickers.
- ``POST /dev/captioned_speech``: Kokoro-FastAPI's route (NDJSON lines of base64 audio and word times), so
  its users switch without code changes.

The same service, scheduler, limits and bearer token as every other route; errors in OpenAI's shape with
our stable codes (``asgi.error_body``), and ``x-request-id`` on every answer.
"""

from __future__ import annotations

import base64
import math
import uuid
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from streamvoice.asgi import error_response, header_value
from streamvoice.engine.g2p.packs import NEEDS as LANGUAGE_PACKS
from streamvoice.engine.g2p.packs import status as pack_status
from streamvoice.engine.streaming.windows import FRAMES_PER_SECOND
from streamvoice.engine.voices import LANGUAGES
from streamvoice.protocol import (
    DEFAULT_VOICE,
    SAMPLE_RATE,
    ErrorCode,
    Limits,
    ProtocolError,
    check_text,
    required_text,
    validate_speed,
)
from streamvoice.server.core.requests import ResolvedRequest, SessionDefaults
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.guards import authorized, listing_service, service_of, unauthorized
from streamvoice.server.surfaces.http_answer import Started, start_answer
from streamvoice.server.surfaces.http_body import Body, sse_event

FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")
CONTENT_TYPES = {
    "mp3": "audio/mpeg",
    "opus": "audio/opus",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}
STREAM_FORMATS = ("audio", "sse")
# OpenAI's voice names, for clients that accept nothing else (Pipecat's OpenAITTSService, some apps).
# Kokoro v1.0 has namesakes for five of them; the rest follow Kokoro-FastAPI's table where it has them.
OPENAI_VOICES = {
    "alloy": "af_alloy",
    "echo": "am_echo",
    "fable": "bm_fable",
    "nova": "af_nova",
    "onyx": "am_onyx",
    "ash": "af_nicole",
    "coral": "bf_emma",
    "sage": "am_michael",
    "shimmer": "af_sky",
    "ballad": "bm_lewis",
    "verse": "am_puck",
    "marin": "af_heart",
    "cedar": "am_fenrir",
}
MODELS = ("kokoro", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")
CREATED = 1_735_689_600  # 2025-01-01, Kokoro v1.0's weights; /v1/models must say something


@dataclass(frozen=True)
class SpeechRequest:
    """An OpenAI speech request, checked; field names are OpenAI's, values ours."""

    input: str
    voice: str = DEFAULT_VOICE
    response_format: str = "mp3"
    speed: float = 1.0
    stream_format: str = "audio"
    lang: str | None = None
    stream: bool = True  # Kokoro-FastAPI's captioned speech: NDJSON lines (true) or one JSON object
    ssml: bool | None = None  # None: SSML when the input starts with <speak>


def _bad(code: ErrorCode, message: str, param: str) -> ProtocolError:
    return ProtocolError(code, message, param=param)


def kokoro_voice(raw: Any, known: frozenset[str]) -> str:
    """A Kokoro voice spec from OpenAI's ``voice``: a name, a blend, an OpenAI name, or ``{"id": ...}``."""
    if isinstance(raw, dict):
        raw = raw.get("id")
    if not isinstance(raw, str) or not raw.strip():
        raise _bad(
            ErrorCode.INVALID_FIELD,
            'voice must be a voice name such as "af_heart", a blend such as "af_heart(2)+am_michael(1)", '
            f'one of OpenAI\'s names ({", ".join(OPENAI_VOICES)}), or {{"id": "af_heart"}}',
            "voice",
        )
    name = raw.strip()
    if name.lower() in OPENAI_VOICES and name.lower() not in known:
        return OPENAI_VOICES[name.lower()]
    return name


def speech_request(obj: dict[str, Any], known: frozenset[str], limits: Limits) -> SpeechRequest:
    """Check an OpenAI speech body: each mistake names its field (``param``) and what to send instead."""
    text = required_text(obj, "input")
    try:
        check_text(text, limits, field="input")
    except ProtocolError as exc:
        raise exc.naming(param="input") from None
    fmt = obj.get("response_format") or "mp3"
    if not isinstance(fmt, str) or fmt.lower() not in FORMATS:
        shown = fmt[:20] if isinstance(fmt, str) else type(fmt).__name__
        raise _bad(
            ErrorCode.UNSUPPORTED_FORMAT,
            f'"response_format" {shown!r} is not supported; use one of {", ".join(FORMATS)}',
            "response_format",
        )
    speed = obj.get("speed", 1.0)
    try:
        speed = validate_speed(1.0 if speed is None else speed)
    except ProtocolError as exc:
        raise exc.naming(param="speed") from None
    stream_format = obj.get("stream_format") or "audio"
    if stream_format not in STREAM_FORMATS:
        raise _bad(ErrorCode.INVALID_FIELD, '"stream_format" must be "audio" or "sse"', "stream_format")
    lang = obj.get("lang_code", obj.get("lang"))
    if lang is not None:
        if not isinstance(lang, str) or not lang.strip() or len(lang) > 16:
            raise _bad(
                ErrorCode.INVALID_FIELD, '"lang_code" must be a language such as "a" or "en-us"', "lang_code"
            )
        lang = LANGUAGES.get(lang.strip().lower(), (lang.strip().lower(), ""))[0]
    return SpeechRequest(
        input=text,
        voice=kokoro_voice(obj.get("voice", DEFAULT_VOICE), known),
        response_format=fmt.lower(),
        speed=float(speed),
        stream_format=stream_format,
        lang=lang,
        stream=obj.get("stream", True) is not False,
        ssml=obj.get("ssml") if isinstance(obj.get("ssml"), bool) else None,
    )


def usage(text: str, samples: int, sample_rate: int) -> dict[str, int]:
    """OpenAI's usage block: input counted in words, output in Kokoro's 25 ms frames (no tokenizer of
    OpenAI's applies to a Kokoro model; these are the units its cost follows)."""
    words = len(text.split())
    frames = math.ceil(samples * FRAMES_PER_SECOND / sample_rate)
    return {"input_tokens": words, "output_tokens": frames, "total_tokens": words + frames}


# --- routes ---------------------------------------------------------------------------------------------


def request_id_headers(request: Request) -> dict[str, str]:
    """The caller's request id echoed (made safe for a header), else a new one."""
    echoed = request.headers.get("x-request-id")
    return {"x-request-id": header_value(echoed) if echoed else f"req_{uuid.uuid4().hex[:20]}"}


async def _speech(obj: dict[str, Any], service: SpeechService) -> tuple[ResolvedRequest, SpeechRequest]:
    speech = speech_request(obj, service.engine.voice_names, service.config.limits)
    try:
        resolved = service.requests.resolve(
            SessionDefaults(),
            speech.voice,
            speech.speed,
            speech.response_format,
            speech.lang,
            ssml=speech.ssml,
            text=speech.input,
        )
    except ProtocolError as exc:
        if exc.param is None and exc.code == ErrorCode.UNKNOWN_VOICE:
            raise exc.naming(param="voice") from None
        raise
    return resolved, speech


async def start_speech(request: Request, headers: dict[str, str]) -> Started[SpeechRequest] | Response:
    """An OpenAI speech body through the one HTTP start sequence (``http_answer.start_answer``): its first
    audio, or the error."""
    return await start_answer(request, _speech, headers)


async def speech(request: Request) -> Response:
    headers = request_id_headers(request)
    started = await start_speech(request, headers)
    if isinstance(started, Response):
        return started
    speech = started.parsed
    if speech.stream_format == "sse":
        return started.respond(SpeechEvents(speech.input), "text/event-stream")
    return started.respond(Body(), CONTENT_TYPES[speech.response_format])


async def voices(request: Request) -> Response:
    headers = request_id_headers(request)
    try:
        service = listing_service(request)
    except ProtocolError as exc:
        return error_response(exc, headers)
    g2p = service.engine.g2p
    listed = [
        {
            "id": v.name,
            "name": v.name,
            "language": v.lang,
            "language_name": v.language,
            "gender": v.gender,
            "installed": g2p.installed(v.lang),
        }
        for v in service.engine.voices()
    ]
    language_packs = [
        {"pack": s.pack, "installed": s.installed, "install": f"pip install 'streamvoice[{s.pack}]'"}
        for s in (pack_status(p) for p in LANGUAGE_PACKS)
    ]
    body = {"voices": listed, "language_packs": language_packs, "openai_aliases": OPENAI_VOICES}
    return JSONResponse(body, headers=headers)


async def models(request: Request) -> Response:
    headers = request_id_headers(request)
    if not authorized(request, service_of(request)):
        return error_response(unauthorized(request), headers)
    data = [{"id": m, "object": "model", "created": CREATED, "owned_by": "streamvoice"} for m in MODELS]
    return JSONResponse({"object": "list", "data": data}, headers=headers)


ROUTES = [
    Route("/v1/audio/speech", speech, methods=["POST"]),
    Route("/v1/audio/voices", voices, methods=["GET"]),
]


# --- bodies ---------------------------------------------------------------------------------------------


def _failure(exc: ProtocolError) -> dict[str, Any]:
    return {"message": exc.message, "type": "server_error", "param": None, "code": str(exc.code)}


class SpeechEvents(Body):
    """OpenAI's SSE: a delta per encoded chunk, then done with usage; a failure after the headers is an
    ``error`` event (the status is long sent) rather than a silently short stream."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples = 0  # the model's samples sent so far: the usage counts them

    def audio(self, data: bytes, samples: int) -> list[bytes]:
        self.samples += samples
        return [sse_event({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode("ascii")})]

    def done(self) -> list[bytes]:
        return [
            sse_event({"type": "speech.audio.done", "usage": usage(self.text, self.samples, SAMPLE_RATE)})
        ]

    def failed(self, error: ProtocolError) -> list[bytes]:
        return [sse_event({"type": "error", "error": _failure(error)})]
