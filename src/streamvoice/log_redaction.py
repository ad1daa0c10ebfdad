"""No caller's key in any log line, whatever logger writes it.

Two rules, applied where every record is made (``logging.setLogRecordFactory``), before any formatter:

1. A library's debug and trace records never carry their arguments. Those are where frames, ASGI scopes and
   headers travel (websockets' ``< TEXT '...'`` cuts a long frame in the middle, so a key's field name can be
   lost; uvicorn's trace ``Started scope=`` holds the query string and the subprotocols): each argument that
   is not a number is replaced by ``[withheld]``, from the structured data, not from the formatted line.
   Our own loggers (``streamvoice.*``) never log a frame, a scope or a header.
2. Every line left (uvicorn's request lines at info, anything else) has its key-like query parameters, key
   headers (any scheme: ``Basic KEY`` too) and key fields of JSON (their names escaped or not) redacted.

Browsers cannot set headers on a WebSocket, so vendor SDKs put the key in the query string (Cartesia's
``api_key`` / ``access_token``, ElevenLabs' ``xi_api_key``), and uvicorn writes the request line, query
included, from two loggers: ``uvicorn.access`` for HTTP and ``uvicorn.error`` for every WebSocket line
(``"WebSocket /tts/websocket?...&api_key=KEY" [accepted]`` and the 403 of a wrong key). A filter on one logger
missed the other, so the redaction sits where every record is made (``logging.setLogRecordFactory``): each
record's line (its message with its arguments) has every key-like query parameter's value (its name decoded, any
case: ``API%5FKEY=`` too) and every key header's value replaced by ``***`` before any handler sees it.
Checked by ``pytest tests/test_log_redaction.py`` (a real server's every log line at debug and trace, every
key form, the frames LiveKit and Pipecat send).
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import unquote_plus

# Parameter names that carry a secret on some wire (and the generic ones a client may try).
KEY_PARAMETERS = frozenset(
    ("api_key", "xi_api_key", "xi-api-key", "access_token", "token", "key", "authorization", "apikey")
)
_QUERY_PARAMETER = re.compile(r"([?&;])([^=&#\s\"'?;]*)=([^&#\s\"';]*)")
# A header as a log line may show it ("authorization: Bearer KEY", "'xi-api-key': 'KEY'", and a browser's
# Deepgram key as the subprotocols "sec-websocket-protocol: token, KEY"): a known scheme is kept, whatever
# else follows the name up to the next space after the secret is withheld ("Basic KEY" too).
_SCHEMES = frozenset(("bearer", "token", "basic", "digest"))
_KEY_HEADER = re.compile(
    r"(?i)\b(authorization|xi-api-key|x-api-key|api-key|sec-websocket-protocol)([\"']?\s*[:=]\s*[\"']?)"
    r"([A-Za-z][\w-]*[\s,]+)?[^\s\"',;]+"
)
LIBRARY_DETAIL_BELOW = logging.INFO  # a library's records below this level keep no argument
WITHHELD = "[withheld]"


def _json_name(name: str) -> str:
    """A pattern for a JSON field name as a client may write it: each character itself or ``\\uXXXX``."""
    return "".join(f"(?:{re.escape(c)}|\\\\u{ord(c):04x})" for c in name)


# A key in a JSON message (ElevenLabs' first message: ``"xi_api_key": "KEY"``, or ``"xi\u005fapi_key"``).
_KEY_FIELD = re.compile(
    r"(?i)([\"'](?:" + "|".join(_json_name(k) for k in sorted(KEY_PARAMETERS)) + r")[\"']\s*:\s*[\"'])[^\"']*"
)


def redact(text: str) -> str:
    """``text`` with every key-like query parameter's and key header's value replaced by ``***``."""
    if "=" in text:
        text = _QUERY_PARAMETER.sub(_redact_parameter, text)
    if ":" in text:
        text = _KEY_FIELD.sub(r"\1***", text)
    if ":" in text or "=" in text:
        text = _KEY_HEADER.sub(_redact_header, text)
    return text


def _redact_header(match: re.Match[str]) -> str:
    scheme = match.group(3) or ""
    kept = scheme if scheme.strip(" ,\t").lower() in _SCHEMES else ""
    return f"{match.group(1)}{match.group(2)}{kept}***"


def _withheld(value: Any) -> Any:
    """A library's argument: numbers kept (byte counts, ports), anything else withheld."""
    return value if isinstance(value, int | float) or value is None else WITHHELD


def _is_library_detail(record: logging.LogRecord) -> bool:
    return record.levelno < LIBRARY_DETAIL_BELOW and not (
        record.name == "streamvoice" or record.name.startswith("streamvoice.")
    )


def _redact_parameter(match: re.Match[str]) -> str:
    name = unquote_plus(match.group(2)).strip().lower()
    return f"{match.group(1)}{match.group(2)}=***" if name in KEY_PARAMETERS else match.group(0)


def _redacted(value: Any) -> Any:
    return redact(value) if isinstance(value, str) else value


class _Redacting:
    """The record factory, wrapping whichever was installed before (so installing twice is harmless)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record: logging.LogRecord = self.inner(*args, **kwargs)
        if _is_library_detail(record):  # frames, scopes, headers: never formatted at all
            if isinstance(record.args, tuple):
                record.args = tuple(_withheld(a) for a in record.args)
            elif isinstance(record.args, dict):
                record.args = {k: _withheld(v) for k, v in record.args.items()}
        record.msg = _redacted(record.msg)
        if isinstance(record.args, tuple):  # kept a tuple: formatters unpack it (uvicorn's access lines)
            record.args = tuple(_redacted(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: _redacted(v) for k, v in record.args.items()}
        try:
            message = record.getMessage()
        except Exception:
            return record
        redacted = redact(message)
        if redacted != message:  # a key its arguments carried apart (websockets' "< %s: %s" header lines)
            record.msg, record.args = redacted, ()
        return record


def install() -> None:
    """For the whole process: every record of every logger, made from now on."""
    factory = logging.getLogRecordFactory()
    if not isinstance(factory, _Redacting):
        logging.setLogRecordFactory(_Redacting(factory))
