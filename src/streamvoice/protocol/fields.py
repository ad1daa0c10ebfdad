"""What every wire checks the same way: the audio formats and rates a client may ask for, text fields and
their bounds, numbers, voices, speeds, pauses and lexicons, each refused with a ``ProtocolError`` that says
what to send. Pure: no I/O, no engine (the server checks voice names against its catalogue on top)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from streamvoice.protocol.errors import ErrorCode, ProtocolError
from streamvoice.text.lexicon import check_lexicon

SAMPLE_RATE = 24_000  # what the model makes


SAMPLE_RATES = (8_000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000)  # what a client may ask for


TELEPHONY_RATE = 8_000  # G.711's rate, the default for ulaw and alaw


AUDIO_FORMATS = ("pcm", "wav", "mp3", "opus", "aac", "flac", "ulaw", "alaw")


G711_FORMATS = ("ulaw", "alaw")


OPUS_RATES = (8_000, 16_000, 24_000, 48_000)  # what libopus encodes


MAX_PAUSE_MS = 3_000


MIN_SPEED, MAX_SPEED = 0.5, 2.0


DEFAULT_VOICE = "af_heart"


DEFAULT_FORMAT = "pcm"


@dataclass(frozen=True)
class Pauses:
    """Silence added after a piece, by the punctuation that ended it (a run-on piece gets none).

    Read speech pauses ~150-300 ms at a comma and ~400-700 ms between sentences; the defaults sit where a
    voice agent sounds attentive rather than slow. Measured from the last audible sound to the next.
    """

    clause_ms: int = 150
    sentence_ms: int = 400
    paragraph_ms: int = 600

    def after(self, kind: str) -> int:
        """The pause (ms) after a piece whose text ended in ``kind`` ("none": no pause)."""
        return {"clause": self.clause_ms, "sentence": self.sentence_ms, "paragraph": self.paragraph_ms}.get(
            kind, 0
        )


DEFAULT_PAUSES = Pauses()


def output_rate(fmt: str, sample_rate: int | None) -> int:
    """The rate a message's audio is sent at: as asked, else 8 kHz for G.711 and the model's 24 kHz."""
    if sample_rate is not None:
        return sample_rate
    return TELEPHONY_RATE if fmt in G711_FORMATS else SAMPLE_RATE


@dataclass(frozen=True)
class Limits:
    """Input limits; the defaults are safe for a public endpoint."""

    max_message_bytes: int = 64 * 1024
    max_text_chars: int = 10_000


DEFAULT_LIMITS = Limits()


MAX_ID_CHARS = 128


MAX_VOICE_CHARS = 256  # eight blend parts with weights fit easily; longer is a mistake or an attack


def parse_json_object(data: str | bytes, limits: Limits = Limits()) -> dict[str, Any]:
    """A frame or request body as a JSON object, or the ProtocolError that says what is wrong with it."""
    size = len(data) if isinstance(data, bytes) else len(data.encode("utf-8", "surrogatepass"))
    if size > limits.max_message_bytes:
        raise ProtocolError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"message is {size} bytes; the limit is {limits.max_message_bytes}. Split the text into "
            "several synthesize messages.",
        )
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError(
                ErrorCode.INVALID_UTF8, "message bytes are not valid UTF-8; send UTF-8 encoded JSON."
            ) from None
    else:
        text = data
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):  # ValueError also covers integers past CPython's digit limit
        raise ProtocolError(
            ErrorCode.INVALID_JSON,
            'message is not valid JSON; send an object such as {"type": "synthesize", "text": "Hello."}',
        ) from None
    if not isinstance(obj, dict):
        raise ProtocolError(
            ErrorCode.INVALID_MESSAGE,
            f"message must be a JSON object, got a JSON {type(obj).__name__}; "
            'send {"type": "synthesize", "text": "..."}',
        )
    return obj


_SURROGATE = re.compile("[\ud800-\udfff]")


def text_field(obj: Mapping[str, Any], field: str = "text", msg_id: str | None = None) -> str | None:
    """The text of a message or body, one rule on every surface and wire: absent (or null) is None (the
    caller says whether that is ``missing_text``), anything but a string is ``invalid_field``. HTTP once
    answered ``missing_text`` where the same vendor's socket answered ``invalid_field``."""
    value = obj.get(field)
    if value is None or isinstance(value, str):
        return value
    raise ProtocolError(
        ErrorCode.INVALID_FIELD,
        f'"{field}" must be the text to speak, as a string, not {type(value).__name__}',
        msg_id,
        param=field,
    )


def required_text(obj: Mapping[str, Any], field: str = "text", msg_id: str | None = None) -> str:
    """``text_field`` where the text must be there: absent is ``missing_text``."""
    value = text_field(obj, field, msg_id)
    if value is None:
        raise ProtocolError(
            ErrorCode.MISSING_TEXT, f'send "{field}": the text to speak, as a string', msg_id, param=field
        )
    return value


MAX_PLAYED_MS = 7 * 24 * 3600 * 1000.0  # longer than any session lives: a larger one is a client's bug


def played_ms(raw: object, msg_id: str | None = None, field: str = "played_ms") -> float | None:
    """A player's position in ms of a session's audio: a number from 0 up, or None when not given."""
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0 <= raw <= MAX_PLAYED_MS:
        raise ProtocolError(
            ErrorCode.INVALID_FIELD,
            f'"{field}" must be the ms of this session\'s audio the player has played: a number from 0 up '
            "(leave it out to use the server's playout clock)",
            msg_id,
        )
    return float(raw)


def whole_number(raw: str, max_digits: int = 9) -> int | None:
    """A query parameter's number: ASCII digits only, else None. ``"²".isdigit()`` is true and ``int("²")``
    fails, so ``isdigit`` alone turned ``sample_rate=²`` into a 500 (``tests/test_protocol.py``)."""
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= max_digits else None


def check_text(
    text: str,
    limits: Limits,
    msg_id: str | None = None,
    field: str = "text",
    max_chars: int | None = None,
    speakable: bool = True,
) -> str:
    """The one check of text to speak, on every surface: valid Unicode, within the cap, and (unless
    ``speakable`` is off, for a streamed fragment) something to say. A lone surrogate (``"\\ud800"`` in
    JSON) is not a character: it failed deep in the phonemiser as a 500 before."""
    limit = limits.max_text_chars if max_chars is None else max_chars
    if len(text) > limit:
        raise ProtocolError(
            ErrorCode.TEXT_TOO_LONG,
            f'"{field}" has {len(text)} characters; the limit is {limit}. '
            "Send it as several messages (or requests).",
            msg_id,
        )
    if (lone := _SURROGATE.search(text)) is not None:
        raise ProtocolError(
            ErrorCode.INVALID_UTF8,
            f'"{field}" has a lone surrogate (U+{ord(lone.group()):04X}) at character {lone.start()}: '
            "it is not text. Send valid Unicode (a surrogate pair's two halves together, or the character).",
            msg_id,
        )
    if speakable and not text.strip():
        raise ProtocolError(ErrorCode.EMPTY_TEXT, f'"{field}" is empty; send something to say', msg_id)
    if speakable and not any(ch.isalnum() for ch in text):
        raise ProtocolError(
            ErrorCode.EMPTY_TEXT,
            f'"{field}" has nothing speakable (no letters or digits); send words to say',
            msg_id,
        )
    return text


_LEXICON_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def lexicon_name(raw: Any, msg_id: str | None = None) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str) or _LEXICON_NAME.fullmatch(raw) is None:
        raise ProtocolError(
            ErrorCode.INVALID_FIELD, '"lexicon_name" must be 1-64 letters, digits, "_", "." or "-"', msg_id
        )
    return raw


def validate_lexicon(raw: Any, msg_id: str | None = None) -> dict[str, str]:
    try:
        return check_lexicon(raw)
    except ValueError as exc:
        raise ProtocolError(ErrorCode.INVALID_FIELD, str(exc), msg_id) from None


def validate_sample_rate(raw: Any, msg_id: str | None = None) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw not in SAMPLE_RATES:
        shown = (
            raw if isinstance(raw, int | float) and not isinstance(raw, bool) and abs(raw) < 1e9 else "that"
        )
        raise ProtocolError(
            ErrorCode.INVALID_FIELD,
            f'"sample_rate" {shown} is not offered; use one of {", ".join(map(str, SAMPLE_RATES))} (Hz)',
            msg_id,
        )
    return raw


def check_rate_for_format(fmt: str, rate: int, msg_id: str | None = None) -> None:
    """Formats that cannot carry every rate say so, rather than fail in the encoder mid-stream."""
    if fmt == "opus" and rate not in OPUS_RATES:
        raise ProtocolError(
            ErrorCode.INVALID_FIELD,
            f"opus carries {', '.join(map(str, OPUS_RATES))} Hz; ask for one of those or another format",
            msg_id,
        )


def validate_pauses(raw: Any, msg_id: str | None = None) -> dict[str, int]:
    names = [f.name for f in fields(Pauses)]
    if not isinstance(raw, dict) or not raw or set(raw) - set(names):
        raise ProtocolError(
            ErrorCode.INVALID_FIELD,
            f'"pauses" must be an object with any of {", ".join(names)}, e.g. {{"sentence_ms": 300}}',
            msg_id,
        )
    for name, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_PAUSE_MS:
            raise ProtocolError(
                ErrorCode.INVALID_FIELD,
                f'"pauses.{name}" must be a whole number of milliseconds from 0 to {MAX_PAUSE_MS}',
                msg_id,
            )
    return dict(raw)


def validate_voice(raw: Any, msg_id: str | None = None) -> str:
    """The voice field's shape; whether the voice exists is the engine's to say (also ``unknown_voice``)."""
    if not isinstance(raw, str) or not raw.strip():
        raise ProtocolError(
            ErrorCode.UNKNOWN_VOICE, f'"voice" must be a voice name such as "{DEFAULT_VOICE}"', msg_id
        )
    if len(raw) > MAX_VOICE_CHARS:
        raise ProtocolError(
            ErrorCode.UNKNOWN_VOICE,
            f'"voice" has {len(raw)} characters; the limit is {MAX_VOICE_CHARS}. Send a voice name '
            f'such as "{DEFAULT_VOICE}" or a blend such as "af_heart*0.7+am_michael*0.3"',
            msg_id,
        )
    return raw.strip()


def validate_speed(raw: Any, msg_id: str | None = None) -> float:
    # An int is compared as it is: float() of a huge one raises OverflowError (so does math.isfinite).
    number = isinstance(raw, int | float) and not isinstance(raw, bool)
    if not number or (isinstance(raw, float) and not math.isfinite(raw)):
        raise ProtocolError(
            ErrorCode.INVALID_SPEED, f'"speed" must be a number from {MIN_SPEED} to {MAX_SPEED}', msg_id
        )
    if not MIN_SPEED <= raw <= MAX_SPEED:
        raise ProtocolError(
            ErrorCode.INVALID_SPEED,
            f'"speed" is outside {MIN_SPEED}-{MAX_SPEED}; 1.0 is normal pace',
            msg_id,
        )
    return float(raw)


def validate_format(raw: Any, msg_id: str | None = None) -> str:
    if not isinstance(raw, str) or raw.lower() not in AUDIO_FORMATS:
        shown = raw[:20] if isinstance(raw, str) else type(raw).__name__
        raise ProtocolError(
            ErrorCode.UNSUPPORTED_FORMAT,
            f'"format" {shown!r} is not supported; use one of {", ".join(AUDIO_FORMATS)}',
            msg_id,
        )
    return raw.lower()
