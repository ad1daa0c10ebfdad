"""Reading Wyoming events from a socket nobody vouches for: every length is checked before it is read.

A Wyoming event is a JSON header line, then ``data_length`` bytes of JSON data, then ``payload_length``
bytes of payload. The ``wyoming`` package's reader trusts both lengths (``readexactly`` of whatever the
client declares, so memory follows the client's word) and takes floats and lists for them. This reader takes whole non-negative integers within caps only, and says
whether the connection can go on after a bad event: a header it can parse has told it where the next
event starts, so its data and payload can be skipped; a length it refuses means the stream can no
longer be framed, and the connection is closed after the answer.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from wyoming.event import Event

from streamvoice.protocol import ErrorCode

MAX_HEADER_BYTES = 64 * 1024  # the StreamReader's line limit (``asyncio.start_server``'s default)
MAX_TYPE_CHARS = 64
# Text events carry a few KB of JSON data; a TTS server is never sent audio, so payloads stay small.
MAX_PAYLOAD_BYTES = 64 * 1024


class WireError(Exception):
    """A bad event: answered with ``error``; ``fatal`` when the stream can no longer be framed."""

    def __init__(self, code: ErrorCode, message: str, fatal: bool) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.fatal = fatal


@dataclass(frozen=True)
class WireLimits:
    max_data_bytes: int = 64 * 1024
    max_payload_bytes: int = MAX_PAYLOAD_BYTES
    read_timeout_s: float = 10.0  # a declared body must arrive within this once its header has


def _length(header: dict[str, Any], name: str, cap: int) -> int:
    value = header.get(name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise WireError(
            ErrorCode.INVALID_MESSAGE,
            f'"{name}" must be a whole number of bytes, not {type(value).__name__} {str(value)[:20]}',
            fatal=True,
        )
    if value > cap:
        raise WireError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f'"{name}" is {value} bytes; the limit is {cap}. Send the text in several synthesize-chunk events.',
            fatal=True,
        )
    return value


async def read_event(reader: asyncio.StreamReader, limits: WireLimits) -> Event | None:
    """The next event, ``None`` at the end of the stream, or ``WireError``."""
    try:
        line = await reader.readline()
    except (ValueError, asyncio.LimitOverrunError):
        raise WireError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"an event header is longer than {MAX_HEADER_BYTES} bytes; headers are one short JSON line",
            fatal=True,
        ) from None
    if not line:
        return None
    if not line.endswith(b"\n"):
        return None  # the connection closed mid-header
    try:
        header = json.loads(line)
    except (ValueError, RecursionError):
        raise WireError(
            ErrorCode.INVALID_JSON, "an event header is not valid JSON; send one JSON object per line", False
        ) from None
    if not isinstance(header, dict):
        raise WireError(ErrorCode.INVALID_MESSAGE, "an event header must be a JSON object", fatal=False)
    data_length = _length(header, "data_length", limits.max_data_bytes)
    payload_length = _length(header, "payload_length", limits.max_payload_bytes)
    try:
        async with asyncio.timeout(limits.read_timeout_s):
            data_bytes = await reader.readexactly(data_length) if data_length else b""
            payload = await reader.readexactly(payload_length) if payload_length else None
    except asyncio.IncompleteReadError:
        return None  # closed before the declared bytes came
    except TimeoutError:
        raise WireError(
            ErrorCode.TIMEOUT,
            f"the event's declared data did not arrive within {limits.read_timeout_s:g} s",
            fatal=True,
        ) from None
    kind = header.get("type")
    if not isinstance(kind, str) or not kind or len(kind) > MAX_TYPE_CHARS:
        raise WireError(
            ErrorCode.INVALID_MESSAGE,
            'an event header needs "type", a short string such as "synthesize"',
            fatal=False,
        )
    data = header.get("data") or {}
    if not isinstance(data, dict):
        raise WireError(ErrorCode.INVALID_MESSAGE, '"data" must be a JSON object', fatal=False)
    if data_bytes:
        try:
            more = json.loads(data_bytes)
        except (ValueError, RecursionError):
            raise WireError(
                ErrorCode.INVALID_JSON, "an event's data is not valid JSON", fatal=False
            ) from None
        if not isinstance(more, dict):
            raise WireError(ErrorCode.INVALID_MESSAGE, "an event's data must be a JSON object", fatal=False)
        data = {**data, **more}
    return Event(type=kind, data=data, payload=payload)
