"""ElevenLabs' HTTP routes: speech (streamed), with timestamps (whole or per line), voices and models."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute

from streamvoice.engine.voices import LANGUAGES
from streamvoice.protocol import (
    check_text,
    required_text,
)
from streamvoice.server.core.piece_audio import Words
from streamvoice.server.core.requests import ResolvedRequest
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.contexts import b64
from streamvoice.server.surfaces.elevenlabs.alignment import Char, Spelled, http_alignment
from streamvoice.server.surfaces.elevenlabs.dictionaries import ROUTES as DICTIONARY_ROUTES
from streamvoice.server.surfaces.elevenlabs.dictionaries import with_dictionaries
from streamvoice.server.surfaces.elevenlabs.request import MEDIA, MODEL_IDS, http_error, resolve
from streamvoice.server.surfaces.elevenlabs.socket import multi_stream_input, stream_input
from streamvoice.server.surfaces.elevenlabs.user import ROUTES as USER_ROUTES
from streamvoice.server.surfaces.elevenlabs.voices import search_voices, voices
from streamvoice.server.surfaces.guards import authorized, caller, service_of, unauthorized
from streamvoice.server.surfaces.http_answer import audio_answer, start_answer
from streamvoice.server.surfaces.http_body import Gathered, Marked


def _parser(request: Request) -> Any:
    async def parse(obj: dict[str, Any], service: SpeechService) -> tuple[ResolvedRequest, None]:
        text = required_text(obj)
        check_text(text, service.config.limits)
        voice_id = request.path_params.get("voice_id", "")
        fmt = request.query_params.get("output_format")
        resolved = resolve(service, voice_id, fmt, text, obj.get("voice_settings"), obj.get("language_code"))
        locators = obj.get("pronunciation_dictionary_locators")
        return await with_dictionaries(service, resolved, caller(request), locators), None

    return parse


async def speech(request: Request) -> Response:
    """``POST /v1/text-to-speech/{voice_id}`` and ``/stream``: the audio, streamed as it is made."""
    return await audio_answer(request, _parser(request), _media, http_error)


def _media(resolved: ResolvedRequest) -> str:
    return MEDIA.get(resolved.format, "audio/pcm")


def _characters() -> Callable[[Words], list[Char]]:
    """A fresh answer's characters, piece by piece (``alignment.Spelled``)."""
    spelled = Spelled()
    return lambda words: spelled(words.times)


def _timestamped_body(audio: bytes, chars: list[Char]) -> dict[str, Any]:
    alignment = http_alignment(chars)
    return {"audio_base64": b64(audio), "alignment": alignment, "normalized_alignment": alignment}


def _timestamped_line(audio: bytes, chars: list[Char]) -> bytes:
    return (json.dumps(_timestamped_body(audio, chars)) + "\n").encode()


async def with_timestamps(request: Request) -> Response:
    """``POST .../with-timestamps``: one JSON object (the whole audio and every character's time)."""
    started = await start_answer(request, _parser(request), render=http_error)
    if isinstance(started, Response):
        return started
    return await started.whole(
        request, Gathered(_characters()), lambda audio, chars: JSONResponse(_timestamped_body(audio, chars))
    )


async def stream_with_timestamps(request: Request) -> Response:
    """``POST .../stream/with-timestamps``: a JSON object per line, as each chunk is made."""
    started = await start_answer(request, _parser(request), render=http_error)
    if isinstance(started, Response):
        return started
    return started.respond(Marked(_characters(), _timestamped_line), "application/json")


async def models(request: Request) -> Response:
    """ElevenLabs' model list (``GET /v1/models`` with ``xi-api-key``: the app routes it here)."""
    if not authorized(request, service_of(request)):
        return http_error(unauthorized(request))
    languages = [{"language_id": ours, "name": name} for ours, name in LANGUAGES.values()]
    listed = [
        {
            "model_id": model_id,
            "name": f"Kokoro-82M (answering for {model_id})",
            "can_do_text_to_speech": True,
            "can_do_voice_conversion": False,
            "can_use_style": False,
            "can_use_speaker_boost": False,
            "serves_pro_voices": False,
            "languages": languages,
            "description": "Kokoro-82M served by streamvoice",
        }
        for model_id in ("kokoro", *MODEL_IDS)
    ]
    return JSONResponse(listed)


ROUTES = [
    WebSocketRoute("/v1/text-to-speech/{voice_id}/stream-input", stream_input),
    WebSocketRoute("/v1/text-to-speech/{voice_id}/multi-stream-input", multi_stream_input),
    Route("/v1/text-to-speech/{voice_id}", speech, methods=["POST"]),
    Route("/v1/text-to-speech/{voice_id}/stream", speech, methods=["POST"]),
    Route("/v1/text-to-speech/{voice_id}/with-timestamps", with_timestamps, methods=["POST"]),
    Route("/v1/text-to-speech/{voice_id}/stream/with-timestamps", stream_with_timestamps, methods=["POST"]),
    Route("/v1/voices", voices, methods=["GET"]),
    Route("/v2/voices", search_voices, methods=["GET"]),
    *DICTIONARY_ROUTES,
    *USER_ROUTES,
]
