"""No caller's key in any log line, whatever logger writes it.

Browsers cannot set headers on a WebSocket, so vendor SDKs put the key in the query string (Cartesia's
``api_key`` / ``access_token``, ElevenLabs' ``xi_api_key``), and uvicorn writes the request line, query
included, from two loggers: ``uvicorn.access`` for HTTP and ``uvicorn.error`` for every WebSocket line
(``"WebSocket /tts/websocket?...&api_key=KEY" [accepted]`` and the 403 of a wrong key). A filter on one logger
missed the other, so the redaction sits where every record is made (``logging.setLogRecordFactory``): each
record's line (its message with its arguments) has every key-like query parameter's value (its name decoded, any
case: ``API%5FKEY=`` too) and every key header's value replaced by ``***`` before any handler sees it.
Checked by ``pytest tests/test_log_redaction.py`` (a real server's every log line, every key form).
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
# Deepgram key as the subprotocols "sec-websocket-protocol: token, KEY").
_KEY_HEADER = re.compile(
    r"(?i)\b(authorization|xi-api-key|x-api-key|api-key|sec-websocket-protocol)([\"']?\s*[:=]\s*[\"']?)"
    r"((?:bearer|token)[\s,]+)?[^\s\"',;]+"
)

# A key in a JSON message a debug line shows (ElevenLabs' first message: ``"xi_api_key": "KEY"``).
_KEY_FIELD = re.compile(
    r"(?i)([\"'](?:" + "|".join(re.escape(k) for k in sorted(KEY_PARAMETERS)) + r")[\"']\s*:\s*[\"'])[^\"']*"
)


def redact(text: str) -> str:
    """``text`` with every key-like query parameter's and key header's value replaced by ``***``."""
    if "=" in text:
        text = _QUERY_PARAMETER.sub(_redact_parameter, text)
    if ":" in text:
        text = _KEY_FIELD.sub(r"\1***", text)
    if ":" in text or "=" in text:
        text = _KEY_HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3) or ''}***", text)
    return text


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
