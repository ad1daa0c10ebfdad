"""An answer streamed as an HTTP body, for every HTTP route: encoded audio per decoded window (or the SSE
events of ``/invocations``), the first item awaited before the headers, and a stream nobody reads timed out.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import Any

from streamvoice.asgi import TimedStreamingResponse
from streamvoice.engine.alignment import as_json
from streamvoice.server.core.events import Failed
from streamvoice.server.core.metrics import Metrics
from streamvoice.server.core.piece_audio import Words
from streamvoice.server.core.requests import ResolvedRequest
from streamvoice.server.core.seat import Seat
from streamvoice.server.core.utterance import Utterance
from streamvoice.server.surfaces.rendering import Sound, encoded_events

log = logging.getLogger("streamvoice.server")


class TimedStream(TimedStreamingResponse):
    """A streamed speech answer: gives up on a client that reads nothing for ``send_timeout_s``
    (``slow_consumer``) and gives its seat back (``on_close``: ``Seat.leave``) however it ends."""

    def __init__(
        self,
        body: AsyncGenerator[bytes],
        media_type: str,
        metrics: Metrics,
        timeout_s: float,
        headers: dict[str, str] | None = None,
        on_close: Callable[[], None] | None = None,
    ):
        super().__init__(
            body,
            media_type,
            timeout_s,
            headers=headers,
            on_close=on_close,
            on_timeout=lambda: metrics.count_error("slow_consumer"),
        )


Item = Sound | Words  # encoded audio (``rendering``) and word times, in speaking order


async def first_audio(seat: Seat, request: ResolvedRequest) -> tuple[Item, AsyncGenerator[Item]]:
    """Open the answer on its seat (a listener slot at once, or once one known to free in time has: an HTTP
    caller cannot be told it waits, so it is refused at once when none will) and wait for its first item
    before any header is sent, so that what can go wrong early (a full server, nothing speakable, a failed
    synthesis) is still an HTTP error with a status, not a cut stream. The caller owns ``seat``: it leaves
    when the answer ends, or when this raises."""
    asked_at = time.monotonic()
    utterance = seat.open(request, None, None, can_wait=False).utterance
    utterance.say()
    metrics = seat.service.metrics
    pieces = audio_items(utterance, request, lambda: metrics.observe_first_audio(time.monotonic() - asked_at))
    try:
        return await anext(pieces), pieces
    except BaseException:
        await pieces.aclose()
        raise


async def audio_items(
    utterance: Utterance, request: ResolvedRequest, on_first_audio: Callable[[], None]
) -> AsyncGenerator[Item]:
    """The utterance's encoded audio and word times (``rendering.encoded_events``); its one error raised (the
    status may still be unsent)."""
    async with aclosing(encoded_events(utterance, request, on_first_audio)) as events:
        async for event in events:  # closing this stops the work at once: a caller that left
            if isinstance(event, Failed):
                raise event.error
            if isinstance(event, Words) or (isinstance(event, Sound) and event.data):
                yield event


async def audio_only(chunks: AsyncGenerator[bytes | Words]) -> AsyncGenerator[bytes]:
    """The audio alone (word times need a form that carries them: SSE, JSON lines)."""
    async with aclosing(chunks):
        async for data in chunks:
            if isinstance(data, bytes):
                yield data


async def marked[M](
    chunks: AsyncGenerator[bytes | Words], marks: Callable[[Words], list[M]]
) -> AsyncGenerator[tuple[bytes, list[M]]]:
    """Each audio chunk with the marks (a wire's word or character times, ``marks`` of each piece's words)
    of the pieces that begin in it: the JSON-line and whole-JSON answers put them on that chunk."""
    pending: list[M] = []
    async with aclosing(chunks):
        async for data in chunks:
            if isinstance(data, Words):
                pending += marks(data)
                continue
            yield data, pending
            pending = []


async def gathered[M](chunks: AsyncGenerator[tuple[bytes, list[M]]]) -> tuple[bytes, list[M]]:
    """A marked answer made whole: all its audio and all its marks."""
    audio, found = bytearray(), []
    async with aclosing(chunks):
        async for data, marks in chunks:
            audio += data
            found += marks
    return bytes(audio), found


def sse_event(payload: dict[str, Any]) -> bytes:
    """One SSE event; ``data: `` keeps its space (LiveKit's OpenAI parser tests for it)."""
    return f"data: {json.dumps(payload)}\n\n".encode()


async def sse_body(request: ResolvedRequest, chunks: AsyncGenerator[bytes | Words]) -> AsyncGenerator[bytes]:
    """Audio as SSE events with base64 data, for InvokeEndpointWithResponseStream callers; each piece's
    word times as an ``alignment`` event before its audio."""

    yield sse_event({"type": "audio_start", "format": request.format, "sample_rate": request.sample_rate})
    seq = 0
    async with aclosing(chunks):
        async for data in chunks:
            if isinstance(data, Words):
                yield sse_event({"type": "alignment", "words": as_json(data.times)})
                continue
            yield sse_event(
                {"type": "audio_chunk", "seq": seq, "data": base64.b64encode(data).decode("ascii")}
            )
            seq += 1
    yield sse_event({"type": "audio_end", "chunks": seq})
