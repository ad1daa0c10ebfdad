"""Kokoro-FastAPI's captioned speech, ``POST /dev/captioned_speech``, so its users switch without code
changes: the OpenAI speech body, answered as NDJSON lines ``{"audio", "audio_format", "timestamps"}`` as
audio is ready (``stream``, the default) or as one JSON object; each piece's words, in seconds, ride on its
first chunk. The same front door, limits and token as the OpenAI route (``openai_api``)."""

from __future__ import annotations

import base64
import json
from functools import partial
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from streamvoice.server.core.piece_audio import Words
from streamvoice.server.surfaces.http_body import Gathered, Marked
from streamvoice.server.surfaces.openai.speech import request_id_headers, start_speech


async def captioned_speech(request: Request) -> Response:
    """Kokoro-FastAPI's captioned speech: with ``stream`` (default) NDJSON lines ``{"audio", "audio_format",
    "timestamps"}`` as audio is ready, each piece's words (seconds) on its first chunk; else one JSON."""
    started = await start_speech(request, request_id_headers(request))
    if isinstance(started, Response):
        return started
    fmt = started.parsed.response_format
    if started.parsed.stream:
        return started.respond(Marked(_timestamps, partial(_line, fmt)), "application/x-ndjson")

    def reply(audio: bytes, stamps: list[dict[str, Any]]) -> Response:
        body = {"audio": base64.b64encode(audio).decode(), "audio_format": fmt, "timestamps": stamps}
        return JSONResponse(body, headers=started.headers)

    return await started.whole(request, Gathered(_timestamps), reply)


def _timestamps(words: Words) -> list[dict[str, Any]]:
    """Kokoro-FastAPI's word times: seconds."""
    return [
        {"word": w.word, "start_time": round(w.start_ms / 1000, 3), "end_time": round(w.end_ms / 1000, 3)}
        for w in words.times
    ]


def _line(fmt: str, data: bytes, words: list[dict[str, Any]]) -> bytes:
    line = {"audio": base64.b64encode(data).decode("ascii"), "audio_format": fmt, "timestamps": words}
    return (json.dumps(line) + "\n").encode()


ROUTES = [Route("/dev/captioned_speech", captioned_speech, methods=["POST"])]
