"""The session protocol's vocabulary: the messages a client sends (synthesize, append, flush, end, configure,
cancel, close), the events the server answers, and the framing rule.

Framing rule for readers of the server's stream: a frame is control only if the *whole* frame parses as a
JSON object; anything else is audio. Raw PCM may start with ``{`` (0x7b), so a first-byte test is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from streamvoice.protocol.errors import ErrorCode, ProtocolError
from streamvoice.protocol.fields import (
    DEFAULT_LIMITS,
    MAX_ID_CHARS,
    SAMPLE_RATE,
    Limits,
    check_text,
    lexicon_name,
    parse_json_object,
    played_ms,
    validate_format,
    validate_lexicon,
    validate_pauses,
    validate_sample_rate,
    validate_speed,
    validate_voice,
)

WS_PATH = "/invocations-bidirectional-stream"


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


def _id_of(obj: dict[str, Any]) -> str | None:
    """The message's id as text. One of any other type is refused, not dropped: without its id a ``cancel``,
    ``append`` or ``end`` would act on every message or the latest stream instead of the one meant."""
    raw = obj.get("id")
    if raw is None:
        return None
    if isinstance(raw, str):
        return raw[:MAX_ID_CHARS]
    integer = isinstance(raw, int) and not isinstance(raw, bool)  # JSON's true/false are Python ints
    # An integer of thousands of digits cannot even be turned into a string (CPython's digit limit raises).
    if integer and raw.bit_length() <= 256:
        return str(raw)[:MAX_ID_CHARS]
    shown = "integer that long" if integer else type(raw).__name__
    raise ProtocolError(ErrorCode.INVALID_FIELD, f'"id" must be a string (or an integer), not a JSON {shown}')


def decode_client_frame(data: str | bytes, limits: Limits = DEFAULT_LIMITS) -> ClientMessage:
    """Turn one WebSocket frame (text or binary: SageMaker delivers binary) into a message."""
    return message_from_object(parse_json_object(data, limits), limits)


def _synthesize(obj: dict[str, Any], msg_id: str | None, limits: Limits) -> Synthesize:
    fields = _options(obj, msg_id)
    ssml = obj.get("ssml")
    if ssml is not None and not isinstance(ssml, bool):
        raise ProtocolError(ErrorCode.INVALID_FIELD, '"ssml" must be true or false', msg_id)
    stream = obj.get("stream", False)
    if not isinstance(stream, bool):
        raise ProtocolError(ErrorCode.INVALID_FIELD, '"stream" must be true or false', msg_id)
    if not stream:
        return Synthesize(text=_text(obj, msg_id, limits), id=msg_id, ssml=ssml, **fields)
    if ssml:
        raise ProtocolError(
            ErrorCode.INVALID_FIELD, "SSML is parsed whole: send it as one synthesize, not a stream", msg_id
        )
    text = obj.get("text", "")
    if not isinstance(text, str):
        raise ProtocolError(ErrorCode.INVALID_FIELD, '"text" must be a string', msg_id)
    check_text(text, limits, msg_id, speakable=False)
    return Synthesize(text=text, id=msg_id, ssml=False, stream=True, **fields)


def _append(obj: dict[str, Any], msg_id: str | None, limits: Limits) -> Append:
    text = obj.get("text")
    if not isinstance(text, str):
        raise ProtocolError(
            ErrorCode.MISSING_TEXT, '"append" needs "text": the next tokens, a string', msg_id
        )
    return Append(text=check_text(text, limits, msg_id, speakable=False), id=msg_id)


def _configure(obj: dict[str, Any], msg_id: str | None, limits: Limits) -> Configure:
    pauses = obj.get("pauses")
    lexicon = obj.get("lexicon")
    return Configure(
        **_options(obj, msg_id),
        pauses=validate_pauses(pauses, msg_id) if pauses is not None else None,
        lexicon=validate_lexicon(lexicon, msg_id) if lexicon is not None else None,
        lexicon_name=lexicon_name(obj.get("lexicon_name"), msg_id),
    )


# Each message type's parser: the object, its id, the server's limits.
_PARSERS: dict[str, Callable[[dict[str, Any], str | None, Limits], ClientMessage]] = {
    "synthesize": _synthesize,
    "append": _append,
    "flush": lambda obj, msg_id, limits: Flush(id=msg_id),
    "end": lambda obj, msg_id, limits: End(id=msg_id),
    "configure": _configure,
    "cancel": lambda obj, msg_id, limits: Cancel(
        id=msg_id, played_ms=played_ms(obj.get("played_ms"), msg_id)
    ),
    "close": lambda obj, msg_id, limits: Close(),
}


def message_from_object(obj: dict[str, Any], limits: Limits = DEFAULT_LIMITS) -> ClientMessage:
    msg_id = _id_of(obj)
    kind = obj.get("type")
    if kind is None and "text" in obj:
        kind = "synthesize"  # what the reference client sends
    if kind is None:
        raise ProtocolError(
            ErrorCode.MISSING_TEXT,
            'message has neither "type" nor "text"; send {"type": "synthesize", "text": "..."}',
            msg_id,
        )
    parse = _PARSERS.get(kind) if isinstance(kind, str) else None
    if parse is None:
        shown = kind[:40] if isinstance(kind, str) else type(kind).__name__
        raise ProtocolError(
            ErrorCode.UNKNOWN_TYPE,
            f"unknown message type {shown!r}; use one of {', '.join(MESSAGE_TYPES)}",
            msg_id,
        )
    return parse(obj, msg_id, limits)


def _text(obj: dict[str, Any], msg_id: str | None, limits: Limits) -> str:
    if "text" not in obj:
        raise ProtocolError(ErrorCode.MISSING_TEXT, 'synthesize needs a "text" field', msg_id)
    text = obj["text"]
    if not isinstance(text, str):
        raise ProtocolError(ErrorCode.INVALID_FIELD, '"text" must be a string', msg_id)
    return check_text(text, limits, msg_id)


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
