"""Server-Sent Events, read safely: buffer bytes, act only on complete events.

Transport chunks do not respect event boundaries (the AWS reference sample's authors saw four logical frames arrive as six chunks,
two cut mid-frame), so a reader that treats each chunk as an event breaks on healthy traffic. This one
accepts any cut, including inside a multi-byte UTF-8 character or between ``\\r`` and ``\\n``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SSEEvent:
    data: str
    event: str = "message"
    id: str | None = None

    def json(self) -> Any:
        return json.loads(self.data)


class SSEDecoder:
    def __init__(self) -> None:
        self._buffer = bytearray()
        self._scanned = 0  # bytes of the buffer already searched for an event end
        self._held_cr = b""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        return self._drain(self._held_cr + chunk, final=False)

    def flush(self) -> list[SSEEvent]:
        """End of stream. An event without its closing blank line is incomplete and dropped, per the spec."""
        events = self._drain(self._held_cr, final=True)
        self._buffer = bytearray()
        self._scanned = 0
        return events

    def _drain(self, data: bytes, final: bool) -> list[SSEEvent]:
        # A trailing "\r" may be the first half of "\r\n": hold it until the next byte decides.
        self._held_cr = b"\r" if data.endswith(b"\r") and not final else b""
        if self._held_cr:
            data = data[:-1]
        self._buffer += data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        # Search only what is new (one byte back, for a blank line split across chunks): a large event
        # arriving in many small chunks costs linear time, not a rescan of the whole buffer per chunk.
        events: list[SSEEvent] = []
        start = 0
        while (end := self._buffer.find(b"\n\n", max(start, self._scanned - 1))) >= 0:
            event = parse_block(bytes(self._buffer[start:end]))
            if event is not None:
                events.append(event)
            start = self._scanned = end + 2
        if start:
            del self._buffer[:start]
        self._scanned = len(self._buffer)
        return events


def parse_block(block: bytes) -> SSEEvent | None:
    data_lines: list[str] = []
    event = "message"
    event_id: str | None = None
    for raw in block.split(b"\n"):
        line = raw.decode("utf-8", errors="replace")
        if not line or line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            data_lines.append(value)
        elif name == "event":
            event = value
        elif name == "id":
            event_id = value
    if not data_lines:
        return None
    return SSEEvent(data="\n".join(data_lines), event=event, id=event_id)


def iter_sse(chunks: Iterable[bytes]) -> Iterator[SSEEvent]:
    decoder = SSEDecoder()
    for chunk in chunks:
        yield from decoder.feed(chunk)
    yield from decoder.flush()


async def aiter_sse(chunks: AsyncIterator[bytes]) -> AsyncIterator[SSEEvent]:
    decoder = SSEDecoder()
    async for chunk in chunks:
        for event in decoder.feed(chunk):
            yield event
    for event in decoder.flush():
        yield event
