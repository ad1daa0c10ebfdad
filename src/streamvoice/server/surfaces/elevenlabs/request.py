"""What an ElevenLabs call asks for: its ``output_format``, voice, speed and language, as our request."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse, Response

from streamvoice.protocol import (
    ErrorCode,
    ProtocolError,
    validate_speed,
    whole_number,
)
from streamvoice.server.core.requests import ResolvedRequest, SessionDefaults
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.vendor_voices import vendor_language, vendor_voices

VENDOR = "ElevenLabs"
RATES = (8000, 16000, 22050, 24000, 44100, 48000)
DEFAULT_FORMAT = "mp3_44100_128"
MODEL_IDS = ("eleven_flash_v2_5", "eleven_turbo_v2_5", "eleven_multilingual_v2", "eleven_v3")
STATUS = {400: "invalid_request", 401: "invalid_api_key", 404: "not_found", 413: "text_too_long"}


def output_format(raw: str | None) -> tuple[str, int]:
    """ElevenLabs' ``output_format`` as (our format, rate)."""
    name = (raw or DEFAULT_FORMAT).strip().lower()
    kind, _, rest = name.partition("_")
    rate_text = rest.split("_")[0]
    rate = whole_number(rate_text) or 0
    if kind == "pcm" and rate in RATES:
        return "pcm", rate
    if kind in ("ulaw", "alaw") and rate == 8000:
        return kind, rate
    if kind == "mp3" and rate in (22050, 24000, 44100):
        return "mp3", rate
    raise ProtocolError(
        ErrorCode.UNSUPPORTED_FORMAT,
        f"output_format {name[:32]!r} is not offered; use pcm_8000 ... pcm_48000, ulaw_8000, alaw_8000 or "
        "mp3_22050_32 ... mp3_44100_192",
        param="output_format",
    )


def voice_speed(settings: object) -> float | None:
    if isinstance(settings, dict) and settings.get("speed") is not None:
        return validate_speed(settings["speed"])
    return None


def resolve(
    service: SpeechService,
    voice_id: str,
    fmt: str | None,
    text: str = "",
    settings: object = None,
    lang: object = None,
) -> ResolvedRequest:
    our_format, rate = output_format(fmt)
    voice = vendor_voices(service).resolve(voice_id, VENDOR)
    return service.requests.resolve(
        SessionDefaults(),
        voice,
        voice_speed(settings),
        our_format,
        vendor_language(lang),
        sample_rate=rate,
        ssml=False,
        text=text,
    )


def error_shape(error: ProtocolError) -> dict[str, Any]:
    return {"detail": {"status": STATUS.get(error.http_status, str(error.code)), "message": error.message}}


def http_error(error: ProtocolError, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse(error_shape(error), status_code=error.http_status, headers=headers)
