"""A synthesis streamed as an HTTP body (``POST /invocations``): encoded audio per decoded window, or SSE
events with base64 audio for InvokeEndpointWithResponseStream callers; an unread stream times out.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

import numpy as np
from numpy.typing import NDArray
from starlette.responses import StreamingResponse
from starlette.types import Send

from streamvoice.audio.encoders import make_encoder
from streamvoice.protocol import SAMPLE_RATE
from streamvoice.server.metrics import Metrics
from streamvoice.server.service import ResolvedRequest

log = logging.getLogger("streamvoice.server")


class TimedStream(StreamingResponse):
    """A streamed answer that gives up on a client that reads nothing for ``send_timeout_s`` and is counted
    against the server's session cap while it lasts (an unread stream holds decoded audio like a session)."""

    def __init__(self, body: AsyncGenerator[bytes], media_type: str, metrics: Metrics, timeout_s: float):
        super().__init__(body, media_type=media_type)
        self._metrics = metrics
        self._timeout_s = timeout_s
        self._body = body

    async def stream_response(self, send: Send) -> None:
        async def timed_send(message: Any) -> None:
            await asyncio.wait_for(send(message), timeout=self._timeout_s)

        try:
            await super().stream_response(timed_send)
        except TimeoutError:
            log.warning("POST /invocations: client stopped reading for %.0f s; closing", self._timeout_s)
            self._metrics.count_error("slow_consumer")
        finally:
            self._metrics.active_streams -= 1
            await self._body.aclose()


async def _chain(
    first: NDArray[np.float32], rest: AsyncIterator[NDArray[np.float32]]
) -> AsyncIterator[NDArray[np.float32]]:
    yield first
    async for audio in rest:
        yield audio


async def audio_body(
    request: ResolvedRequest, first: NDArray[np.float32], rest: AsyncGenerator[NDArray[np.float32]]
) -> AsyncGenerator[bytes]:
    encoder = make_encoder(request.format)
    async with aclosing(rest):  # a client that leaves (or times out) releases the queued model work
        async for audio in _chain(first, rest):
            data = encoder.encode(audio)
            if data:
                yield data
    tail = encoder.flush()
    if tail:
        yield tail


async def sse_body(
    request: ResolvedRequest, first: NDArray[np.float32], rest: AsyncGenerator[NDArray[np.float32]]
) -> AsyncGenerator[bytes]:
    """Audio as SSE events with base64 data, for InvokeEndpointWithResponseStream callers."""

    def event(payload: dict[str, object]) -> bytes:
        return f"data: {json.dumps(payload)}\n\n".encode()

    yield event({"type": "audio_start", "format": request.format, "sample_rate": SAMPLE_RATE})
    seq = 0
    async with aclosing(audio_body(request, first, rest)) as chunks:
        async for data in chunks:
            yield event({"type": "audio_chunk", "seq": seq, "data": base64.b64encode(data).decode("ascii")})
            seq += 1
    yield event({"type": "audio_end", "chunks": seq})
