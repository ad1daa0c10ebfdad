"""Kokoro-FastAPI's captioned speech, ``POST /dev/captioned_speech``, so its users switch without code
changes: the OpenAI speech body, answered as NDJSON lines ``{"audio", "audio_format", "timestamps"}`` as
audio is ready (``stream``, the default) or as one JSON object; each piece's words, in seconds, ride on its
first chunk. The same front door, limits and token as the OpenAI route (``openai_api``)."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from streamvoice.server.core.piece_audio import Words
from streamvoice.server.surfaces.http_answer import ClientLeft, until_disconnect
from streamvoice.server.surfaces.http_stream import TimedStream, encoded
from streamvoice.server.surfaces.openai.speech import request_id_headers, start_speech


async def captioned_speech(request: Request) -> Response:
    """Kokoro-FastAPI's captioned speech: with ``stream`` (default) NDJSON lines ``{"audio", "audio_format",
    "timestamps"}`` as audio is ready, each piece's words (seconds) on its first chunk; else one JSON."""
    headers = request_id_headers(request)
    started = await start_speech(request, headers)
    if isinstance(started, Response):
        return started
    fmt = started.parsed.response_format
    captions = _captions(encoded(started.first, started.pieces))
    if started.parsed.stream:
        lines = _captioned_lines(captions, fmt)
        config = started.service.config
        return TimedStream(
            lines,
            "application/x-ndjson",
            started.service.metrics,
            config.send_timeout_s,
            headers,
            started.release,
        )
    try:
        audio, stamps = await until_disconnect(request, _gather(captions))
    except ClientLeft:
        return Response(status_code=499)  # nobody reads it; the work behind it is already released
    finally:
        started.release()
    body = {"audio": base64.b64encode(bytes(audio)).decode(), "audio_format": fmt}
    return JSONResponse({**body, "timestamps": stamps}, headers=headers)


async def _gather(
    captions: AsyncGenerator[tuple[bytes, list[dict[str, Any]]]],
) -> tuple[bytearray, list[dict[str, Any]]]:
    audio, stamps = bytearray(), []
    async with aclosing(captions) as each:
        async for data, words in each:
            audio += data
            stamps += words
    return audio, stamps


async def _captions(
    chunks: AsyncGenerator[bytes | Words],
) -> AsyncGenerator[tuple[bytes, list[dict[str, Any]]]]:
    """Each encoded chunk with the words (Kokoro-FastAPI's shape, seconds) of the piece it begins."""
    pending: list[dict[str, Any]] = []
    async with aclosing(chunks):
        async for data in chunks:
            if isinstance(data, Words):
                pending += [
                    {
                        "word": w.word,
                        "start_time": round(w.start_ms / 1000, 3),
                        "end_time": round(w.end_ms / 1000, 3),
                    }
                    for w in data.times
                ]
                continue
            yield data, pending
            pending = []


async def _captioned_lines(
    captions: AsyncGenerator[tuple[bytes, list[dict[str, Any]]]], fmt: str
) -> AsyncGenerator[bytes]:
    async with aclosing(captions):
        async for data, words in captions:
            line = {"audio": base64.b64encode(data).decode("ascii"), "audio_format": fmt, "timestamps": words}
            yield (json.dumps(line) + "\n").encode()


ROUTES = [Route("/dev/captioned_speech", captioned_speech, methods=["POST"])]
