"""The vocabulary the speech server and its clients share: messages, error codes, and framing rules.

Pure: no I/O, no engine. The server validates engine-specific things (voice names) on top of this.

Framing rule for readers of the server's stream: a frame is control only if the *whole* frame parses as a
JSON object; anything else is audio. Raw PCM may start with ``{`` (0x7b), so a first-byte test is wrong.
"""

from __future__ import annotations

import hmac
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any

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
WS_PATH = "/invocations-bidirectional-stream"


class ErrorCode(StrEnum):
    INVALID_JSON = "invalid_json"
    INVALID_UTF8 = "invalid_utf8"
    INVALID_MESSAGE = "invalid_message"  # valid JSON, but not an object
    UNKNOWN_TYPE = "unknown_type"
    MISSING_TEXT = "missing_text"
    EMPTY_TEXT = "empty_text"
    TEXT_TOO_LONG = "text_too_long"
    MESSAGE_TOO_LARGE = "message_too_large"
    INVALID_FIELD = "invalid_field"
    UNKNOWN_VOICE = "unknown_voice"
    INVALID_SSML = "invalid_ssml"
    LANGUAGE_UNAVAILABLE = "language_unavailable"  # the voice's language pack is not installed
    INVALID_SPEED = "invalid_speed"
    UNSUPPORTED_FORMAT = "unsupported_format"
    QUEUE_FULL = "queue_full"
    SERVER_BUSY = "server_busy"
    IDLE_TIMEOUT = "idle_timeout"
    SESSION_EXPIRED = "session_expired"
    GOING_AWAY = "going_away"
    CANCELLED = "cancelled"
    SYNTHESIS_FAILED = "synthesis_failed"
    NOT_READY = "not_ready"
    UNAUTHORIZED = "unauthorized"
    INTERNAL = "internal_error"
    NOT_FOUND = "not_found"  # no such route (HTTP 404), or no such method on it (405)
    STORE_UNAVAILABLE = "store_unavailable"  # what callers made is kept where the server cannot reach now
    # the agent's turn requests and what can go wrong in a turn
    MISSING_PROMPT = "missing_prompt"
    PROMPT_TOO_LONG = "prompt_too_long"
    INVALID_MODE = "invalid_mode"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    HOST_NOT_ALLOWED = "host_not_allowed"
    SPEECH_UNAVAILABLE = "speech_unavailable"
    SPEECH_FAILED = "speech_failed"
    SPEECH_DISCONNECTED = "speech_disconnected"
    LLM_FAILED = "llm_failed"
    TIMEOUT = "timeout"
    CLOSED = "closed"  # client side: the session ended before a message was answered


# HTTP status for an error code answered over HTTP; everything not listed is a client mistake (400).
HTTP_STATUS = {
    ErrorCode.MESSAGE_TOO_LARGE: 413,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: 415,
    ErrorCode.HOST_NOT_ALLOWED: 421,
    ErrorCode.NOT_READY: 503,
    ErrorCode.GOING_AWAY: 503,
    ErrorCode.SERVER_BUSY: 503,
    ErrorCode.TIMEOUT: 408,
    ErrorCode.SPEECH_UNAVAILABLE: 503,
    ErrorCode.INTERNAL: 500,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.STORE_UNAVAILABLE: 503,
}


# What a 401 says on every route: the key header of each wire this server speaks, not only ours.
UNAUTHORIZED_HINT = (
    "send the server's token: Authorization: Bearer <token> (ElevenLabs clients: xi-api-key; Cartesia: "
    "X-API-Key; Deepgram: Authorization: Token <token>; from a browser: Cartesia's api_key query, "
    "Deepgram's subprotocols token, <token>, ElevenLabs' xi_api_key in the first message)"
)


class ProtocolError(Exception):
    """The one error type of every surface: a stable code, a message that says what to do, the message id.

    Raised for a client's mistake on the server side, and by the client when the server answers ``error``
    (then ``code`` is whatever the server sent).
    """

    def __init__(
        self, code: ErrorCode | str, message: str, id: str | None = None, param: str | None = None
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.id = id
        self.param = param  # the request field at fault, where one is (OpenAI's error shape names it)

    @property
    def http_status(self) -> int:
        return HTTP_STATUS.get(self.code, 400) if isinstance(self.code, ErrorCode) else 400

    def naming(self, id: str | None = None, param: str | None = None) -> ProtocolError:
        """The same error for this message (``id``) or field (``param``): a new one, so an error caught
        and raised again is never changed where something else still holds it."""
        return ProtocolError(
            self.code, self.message, self.id if id is None else id, self.param if param is None else param
        )


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


# --- client -> server -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Synthesize:
    text: str
    id: str | None = None
    voice: str | None = None
    speed: float | None = None
    format: str | None = None
    lang: str | None = None
    sample_rate: int | None = None
    ssml: bool | None = None  # None: SSML when the text starts with <speak>
    stream: bool = False  # True: more text follows in ``append`` messages, until ``end``
    type: str = "synthesize"


@dataclass(frozen=True)
class Append:
    """More of a streamed synthesize's text (an LLM's tokens as they arrive); ``id`` None: the latest one
    still open."""

    text: str
    id: str | None = None
    type: str = "append"


@dataclass(frozen=True)
class Flush:
    """Speak what a streamed synthesize has buffered now, as it stands; more text may follow."""

    id: str | None = None
    type: str = "flush"


@dataclass(frozen=True)
class End:
    """A streamed synthesize has all its text: what is buffered is spoken, then it completes."""

    id: str | None = None
    type: str = "end"


@dataclass(frozen=True)
class Configure:
    voice: str | None = None
    speed: float | None = None
    format: str | None = None
    lang: str | None = None
    sample_rate: int | None = None
    pauses: dict[str, int] | None = None  # the fields of ``Pauses`` to change
    lexicon: dict[str, str] | None = None  # word -> "/phonemes/" or a respelling, for this session
    # With ``lexicon``: also kept under this name (the caller's, on every replica); alone: the kept one is used.
    lexicon_name: str | None = None
    type: str = "configure"


@dataclass(frozen=True)
class Cancel:
    """Without ``id``: everything queued or in progress (barge-in). With ``id``: that message only.
    ``played_ms``: how much of the session's audio the client's player has played (None: the server's own
    playout clock), so the answer can say what of each message cut off was heard."""

    id: str | None = None
    played_ms: float | None = None
    type: str = "cancel"


@dataclass(frozen=True)
class Close:
    type: str = "close"


ClientMessage = Synthesize | Append | Flush | End | Configure | Cancel | Close
MESSAGE_TYPES = ("synthesize", "append", "flush", "end", "configure", "cancel", "close")


@dataclass(frozen=True)
class Limits:
    """Input limits; the defaults are safe for a public endpoint."""

    max_message_bytes: int = 64 * 1024
    max_text_chars: int = 10_000


MAX_ID_CHARS = 128
MAX_VOICE_CHARS = 256  # eight blend parts with weights fit easily; longer is a mistake or an attack


def _id_of(obj: dict[str, Any]) -> str | None:
    raw = obj.get("id")
    if raw is None or isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        # An integer of thousands of digits cannot even be turned into a string (CPython's digit limit
        # raises), so a huge one is refused rather than echoed.
        if raw.bit_length() > 256:
            return None
        return str(raw)[:MAX_ID_CHARS]
    return raw[:MAX_ID_CHARS] if isinstance(raw, str) else None


def decode_client_frame(data: str | bytes, limits: Limits = Limits()) -> ClientMessage:
    """Turn one WebSocket frame (text or binary: SageMaker delivers binary) into a message."""
    return message_from_object(parse_json_object(data, limits), limits)


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


def message_from_object(obj: dict[str, Any], limits: Limits = Limits()) -> ClientMessage:
    msg_id = _id_of(obj)
    kind = obj.get("type")
    if kind is None and "text" in obj:
        kind = "synthesize"  # what the reference client sends
    if kind == "synthesize":
        fields = _options(obj, msg_id)
        ssml = obj.get("ssml")
        if ssml is not None and not isinstance(ssml, bool):
            raise ProtocolError(ErrorCode.INVALID_FIELD, '"ssml" must be true or false', msg_id)
        stream = obj.get("stream", False)
        if not isinstance(stream, bool):
            raise ProtocolError(ErrorCode.INVALID_FIELD, '"stream" must be true or false', msg_id)
        if stream:
            if ssml:
                raise ProtocolError(
                    ErrorCode.INVALID_FIELD,
                    "SSML is parsed whole: send it as one synthesize, not a stream",
                    msg_id,
                )
            text = obj.get("text", "")
            if not isinstance(text, str):
                raise ProtocolError(ErrorCode.INVALID_FIELD, '"text" must be a string', msg_id)
            check_text(text, limits, msg_id, speakable=False)
            return Synthesize(text=text, id=msg_id, ssml=False, stream=True, **fields)
        return Synthesize(text=_text(obj, msg_id, limits), id=msg_id, ssml=ssml, **fields)
    if kind == "append":
        text = obj.get("text")
        if not isinstance(text, str):
            raise ProtocolError(
                ErrorCode.MISSING_TEXT, '"append" needs "text": the next tokens, a string', msg_id
            )
        return Append(text=check_text(text, limits, msg_id, speakable=False), id=msg_id)
    if kind == "flush":
        return Flush(id=msg_id)
    if kind == "end":
        return End(id=msg_id)
    if kind == "configure":
        pauses = obj.get("pauses")
        lexicon = obj.get("lexicon")
        return Configure(
            **_options(obj, msg_id),
            pauses=validate_pauses(pauses, msg_id) if pauses is not None else None,
            lexicon=validate_lexicon(lexicon, msg_id) if lexicon is not None else None,
            lexicon_name=lexicon_name(obj.get("lexicon_name"), msg_id),
        )
    if kind == "cancel":
        return Cancel(id=msg_id, played_ms=played_ms(obj.get("played_ms"), msg_id))
    if kind == "close":
        return Close()
    if kind is None:
        raise ProtocolError(
            ErrorCode.MISSING_TEXT,
            'message has neither "type" nor "text"; send {"type": "synthesize", "text": "..."}',
            msg_id,
        )
    shown = kind[:40] if isinstance(kind, str) else type(kind).__name__
    raise ProtocolError(
        ErrorCode.UNKNOWN_TYPE,
        f"unknown message type {shown!r}; use one of {', '.join(MESSAGE_TYPES)}",
        msg_id,
    )


def _text(obj: dict[str, Any], msg_id: str | None, limits: Limits) -> str:
    if "text" not in obj:
        raise ProtocolError(ErrorCode.MISSING_TEXT, 'synthesize needs a "text" field', msg_id)
    text = obj["text"]
    if not isinstance(text, str):
        raise ProtocolError(ErrorCode.INVALID_FIELD, '"text" must be a string', msg_id)
    return check_text(text, limits, msg_id)


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


def _options(obj: dict[str, Any], msg_id: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    voice = obj.get("voice")
    if voice is not None:
        out["voice"] = validate_voice(voice, msg_id)
    if obj.get("speed") is not None:
        out["speed"] = validate_speed(obj["speed"], msg_id)
    fmt = obj.get("format")
    if fmt is not None:
        out["format"] = validate_format(fmt, msg_id)
    lang = obj.get("lang")
    if lang is not None:
        if not isinstance(lang, str) or not lang.strip() or len(lang) > 16:
            raise ProtocolError(
                ErrorCode.INVALID_FIELD, '"lang" must be a language code such as "en-us"', msg_id
            )
        out["lang"] = lang.strip().lower()
    if obj.get("sample_rate") is not None:
        out["sample_rate"] = validate_sample_rate(obj["sample_rate"], msg_id)
    return out


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


# --- server -> client -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SynthesisStarted:
    id: str | None
    sequence: int
    format: str
    sample_rate: int = SAMPLE_RATE
    type: str = "synthesis_started"


@dataclass(frozen=True)
class Alignment:
    """Word times of one piece of a message, in ms from the first sample of that message's audio."""

    id: str | None
    sequence: int
    words: list[dict[str, object]]  # {"word", "start_ms", "end_ms"}, in the text's order
    type: str = "alignment"


@dataclass(frozen=True)
class SynthesisComplete:
    id: str | None
    sequence: int
    audio_ms: float
    bytes: int
    pieces: int
    type: str = "synthesis_complete"


@dataclass(frozen=True)
class ErrorEvent:
    code: str
    message: str
    id: str | None = None
    sequence: int | None = None
    type: str = "error"


@dataclass(frozen=True)
class Ack:
    """Answers configure, cancel and close so the client knows when they took effect."""

    type: str  # "configured" | "cancelled" | "session_closed"
    detail: dict[str, Any] = field(default_factory=dict)


ServerEvent = SynthesisStarted | Alignment | SynthesisComplete | ErrorEvent | Ack


def encode_event(event: ServerEvent) -> str:
    if isinstance(event, Ack):
        return json.dumps({"type": event.type, **event.detail})
    payload = {k: v for k, v in asdict(event).items() if v is not None or k == "id"}
    return json.dumps(payload)


def decode_control_frame(chunk: bytes | str) -> dict[str, Any] | None:
    """A frame is control iff the whole of it is a JSON object; otherwise it is audio."""
    try:
        text = chunk.decode("utf-8") if isinstance(chunk, bytes) else chunk
        decoded = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return decoded if isinstance(decoded, dict) else None


# Where the vendors' clients put their key (ElevenLabs, Cartesia); ``Authorization`` also takes Deepgram's
# ``Token <key>`` scheme. Each carries the server's AUTH_TOKEN: a client changes its base URL, not its code.
KEY_HEADERS = ("xi-api-key", "x-api-key")


def key_authorized(header: Callable[[str], str | None], token: str | None) -> bool:
    """The token in ``Authorization: Bearer`` (or Deepgram's ``Token``) or a vendor's key header."""
    if not token:
        return True
    scheme, _, supplied = (header("authorization") or "").partition(" ")
    if scheme.lower() in ("bearer", "token") and hmac.compare_digest(supplied.encode(), token.encode()):
        return True
    return any(hmac.compare_digest((header(k) or "").encode(), token.encode()) for k in KEY_HEADERS)


def key_matches(supplied: object, token: str | None) -> bool:
    """A key a browser client sent where no header can be set (a query parameter, a subprotocol, a first
    message): the token, compared in constant time; no token configured means open."""
    if not token:
        return True
    return isinstance(supplied, str) and hmac.compare_digest(supplied.encode(), token.encode())


def bearer_authorized(header: str | None, token: str | None) -> bool:
    """``Authorization: Bearer <token>`` check, in constant time; no token configured means open."""
    if not token:
        return True
    scheme, _, supplied = (header or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(supplied.encode(), token.encode())


def error_body(
    code: ErrorCode | str, message: str, param: str | None = None, status: int = 400
) -> dict[str, Any]:
    """The HTTP error shape, OpenAI's: {"error": {"message", "type", "param", "code"}}, so the OpenAI SDK
    (and anything written for it) raises a typed error with our message and stable code."""
    kind = "server_error" if status >= 500 else "authentication_error" if status == 401 else ""
    kind = kind or ("rate_limit_error" if status == 429 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": str(code)}}
