"""An answer streamed as an HTTP body, for every HTTP route: its encoded audio and word times (each wire's
``http_body.Body`` renders them), the first awaited before the headers, and a stream nobody reads timed out.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing

from streamvoice.asgi import TimedStreamingResponse
from streamvoice.server.core.events import Failed
from streamvoice.server.core.metrics import Metrics
from streamvoice.server.core.piece_audio import Words
from streamvoice.server.core.requests import ResolvedRequest
from streamvoice.server.core.seat import Seat
from streamvoice.server.core.utterance import Utterance
from streamvoice.server.surfaces.http_body import Item
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
