"""An HTTP answer's body, rendered event by event: the HTTP side of a wire's codec.

A wire's body is a ``Body`` with its own typed state (an SSE sequence number, the marks waiting for the next
chunk, the samples its usage counts). The one loop (``rendered``) feeds it the answer's encoded audio and word
times in speaking order, then asks how the body ends, or what a failure after the headers becomes (an error
event, or a body stopped short: its status was long sent). Checked by ``pytest tests/test_http_stream.py``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import Any

from streamvoice.protocol import ProtocolError
from streamvoice.server.core.piece_audio import Words
from streamvoice.server.surfaces.rendering import Sound

Item = Sound | Words  # encoded audio (``rendering``) and word times, in speaking order


class Body:
    """The audio alone, as it is encoded (PCM, WAV, MP3, mu-law ...); word times need a form that carries
    them (SSE, JSON lines), and a failure after the headers stops the body short."""

    def opening(self) -> list[bytes]:
        return []

    def audio(self, data: bytes, samples: int) -> list[bytes]:
        return [data]

    def words(self, words: Words) -> list[bytes]:
        return []

    def done(self) -> list[bytes]:
        return []

    def failed(self, error: ProtocolError) -> list[bytes] | None:
        """What ends a body that failed after its headers; None: it stops short."""
        return None


class Marked[M](Body):
    """Each audio chunk as ``line(audio, marks)``, with the marks (a wire's word or character times, ``marks``
    of each piece's words) of the pieces that begin in it: the JSON-line answers."""

    def __init__(self, marks: Callable[[Words], list[M]], line: Callable[[bytes, list[M]], bytes]) -> None:
        self.marks = marks
        self.line = line
        self.pending: list[M] = []

    def words(self, words: Words) -> list[bytes]:
        self.pending += self.marks(words)
        return []

    def audio(self, data: bytes, samples: int) -> list[bytes]:
        line, self.pending = self.line(data, self.pending), []
        return [line]


class Gathered[M](Body):
    """All the audio and all its marks, for an answer sent as one body once it is whole (``Started.whole``)."""

    def __init__(self, marks: Callable[[Words], list[M]]) -> None:
        self.marks = marks
        self.found: list[M] = []
        self.whole = bytearray()

    def words(self, words: Words) -> list[bytes]:
        self.found += self.marks(words)
        return []

    def audio(self, data: bytes, samples: int) -> list[bytes]:
        self.whole += data
        return []


def sse_event(payload: dict[str, Any]) -> bytes:
    """One SSE event; ``data: `` keeps its space (LiveKit's OpenAI parser tests for it)."""
    return f"data: {json.dumps(payload)}\n\n".encode()


async def rendered(items: AsyncGenerator[Item], body: Body) -> AsyncGenerator[bytes]:
    """The one loop of every HTTP answer: ``items`` through ``body``. Closing it closes ``items``, which stops
    the work behind them (a client that left or timed out releases its queued model calls)."""
    for frame in body.opening():
        yield frame
    try:
        async with aclosing(items):
            async for item in items:
                for frame in (
                    body.audio(item.data, item.samples) if isinstance(item, Sound) else body.words(item)
                ):
                    yield frame
    except ProtocolError as exc:
        if (ending := body.failed(exc)) is None:
            raise
        for frame in ending:
            yield frame
        return
    for frame in body.done():
        yield frame
