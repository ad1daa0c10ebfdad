"""What an ElevenLabs call asks for: its ``output_format``, voice, speed and language, as our request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamvoice.asgi import shaped_errors
from streamvoice.protocol import (
    SAMPLE_RATES,
    ErrorCode,
    ProtocolError,
    validate_speed,
    whole_number,
)
from streamvoice.server.core.requests import ResolvedRequest, SessionDefaults
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.vendor_voices import vendor_language, vendor_voices

VENDOR = "ElevenLabs"
DEFAULT_FORMAT = "mp3_44100_128"
MODEL_IDS = ("eleven_flash_v2_5", "eleven_turbo_v2_5", "eleven_multilingual_v2", "eleven_v3")
STATUS = {400: "invalid_request", 401: "invalid_api_key", 404: "not_found", 413: "text_too_long"}
# Every ``output_format`` the SDK enumerates (``TextToSpeechConvertRequestOutputFormat``; read by
# ``tests/test_vendor_formats.py``): rates and bitrates per kind.
RATES = {"pcm": SAMPLE_RATES, "wav": SAMPLE_RATES, "ulaw": (8000,), "alaw": (8000,),
         "mp3": (22050, 24000, 44100), "opus": (48000,)}  # fmt: skip
BITRATES_KBPS = {"mp3": (32, 48, 64, 96, 128, 192), "opus": (32, 64, 96, 128, 192)}
MEDIA = {
    "mp3": "audio/mpeg",
    "ulaw": "audio/basic",
    "alaw": "audio/x-alaw-basic",
    "wav": "audio/wav",
    "opus": "audio/ogg",
}


@dataclass(frozen=True)
class OutputFormat:
    format: str  # ours
    rate: int
    bitrate_kbps: int | None = None


def output_format(raw: str | None) -> OutputFormat:
    """ElevenLabs' ``output_format`` (``kind_rate`` or ``kind_rate_kbps``) as ours."""
    name = (raw or DEFAULT_FORMAT).strip().lower()
    kind, _, rest = name.partition("_")
    rate_text, _, bitrate_text = rest.partition("_")
    rate = whole_number(rate_text) or 0
    bitrate = whole_number(bitrate_text) if bitrate_text else None
    if rate in RATES.get(kind, ()) and (
        bitrate is None if kind not in BITRATES_KBPS else bitrate in (None, *BITRATES_KBPS[kind])
    ):
        return OutputFormat(kind, rate, bitrate)
    raise ProtocolError(
        ErrorCode.UNSUPPORTED_FORMAT,
        f"output_format {name[:32]!r} is not offered; use pcm_8000 ... pcm_48000, wav_8000 ... wav_48000, "
        "ulaw_8000, alaw_8000, mp3_22050_32 ... mp3_44100_192 or opus_48000_32 ... opus_48000_192",
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
    asked = output_format(fmt)
    voice = vendor_voices(service).resolve(voice_id, VENDOR)
    return service.requests.resolve(
        SessionDefaults(),
        voice,
        voice_speed(settings),
        asked.format,
        vendor_language(lang),
        sample_rate=asked.rate,
        ssml=False,
        text=text,
        bitrate_kbps=asked.bitrate_kbps,
    )


def error_shape(error: ProtocolError) -> dict[str, Any]:
    return {"detail": {"status": STATUS.get(error.http_status, str(error.code)), "message": error.message}}


http_error = shaped_errors(error_shape)
