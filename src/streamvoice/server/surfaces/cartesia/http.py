"""Cartesia's HTTP speech routes: bytes and SSE (the socket's events, ``tts.py``), and its voice list."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from streamvoice.audio.encoders import raw_duration_ms
from streamvoice.protocol import ProtocolError, check_text, required_text
from streamvoice.server.core.piece_audio import Words
from streamvoice.server.core.requests import ResolvedRequest
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.cartesia.dictionaries import with_dictionary
from streamvoice.server.surfaces.cartesia.shapes import cursor_page, http_error
from streamvoice.server.surfaces.cartesia.tts import (
    CONTAINERS,
    CREATED,
    chunk_event,
    error_event,
    resolve,
    timestamps_event,
)
from streamvoice.server.surfaces.guards import caller, listing_service
from streamvoice.server.surfaces.http_answer import audio_answer, start_answer
from streamvoice.server.surfaces.http_body import Body, sse_event


def _parser(request: Request, containers: tuple[str, ...]) -> Any:
    async def parse(obj: dict[str, Any], service: SpeechService) -> tuple[ResolvedRequest, bool]:
        text = required_text(obj, "transcript")
        check_text(text, service.config.limits, field="transcript")
        resolved = resolve(service, obj, text, containers)
        resolved = await with_dictionary(service, resolved, caller(request), obj.get("pronunciation_dict_id"))
        return resolved, obj.get("add_timestamps") is True

    return parse


def _media(resolved: ResolvedRequest) -> str:
    return {"wav": "audio/wav", "mp3": "audio/mpeg"}.get(resolved.format, "application/octet-stream")


async def tts_bytes(request: Request) -> Response:
    return await audio_answer(request, _parser(request, CONTAINERS), _media, http_error)


async def tts_sse(request: Request) -> Response:
    started = await start_answer(request, _parser(request, ("raw",)), render=http_error)
    if isinstance(started, Response):
        return started
    return started.respond(Events(started.resolved, started.parsed), "text/event-stream")


class Events(Body):
    """Cartesia's SSE: a ``chunk`` per encoded chunk (its step in ms), ``timestamps`` when asked, ``done``;
    a failure after the headers is an ``error`` event."""

    def __init__(self, request: ResolvedRequest, timestamps: bool) -> None:
        self.fmt, self.rate = request.format, request.sample_rate
        self.timestamps = timestamps

    def audio(self, data: bytes, samples: int) -> list[bytes]:
        step = round(raw_duration_ms(self.fmt, self.rate, len(data)), 1)  # bytes: 1, 2 or 4 per sample
        return [sse_event(chunk_event(data, step))]

    def words(self, words: Words) -> list[bytes]:
        return [sse_event(timestamps_event(words.times))] if self.timestamps and words.times else []

    def done(self) -> list[bytes]:
        return [sse_event({"type": "done", "done": True, "status_code": 200})]

    def failed(self, error: ProtocolError) -> list[bytes]:
        return [sse_event({**error_event(error, None), "request_id": ""})]


async def voices(request: Request) -> Response:
    try:
        service = listing_service(request)
    except ProtocolError as exc:
        return http_error(exc)
    listed: list[dict[str, Any]] = [
        {
            "id": v.name,
            "name": v.name,
            "description": f"Kokoro-82M {v.language} {v.gender} voice",
            "language": v.lang.split("-")[0] if v.lang != "cmn" else "zh",
            "gender": "feminine" if v.gender == "female" else "masculine",
            "is_owner": False,
            "is_public": True,
            "access": "public",
            "visibility": "all",
            "tagline": "",
            "locales": [],
            "created_at": CREATED,
        }
        for v in service.engine.voices()
    ]
    page, more = cursor_page(listed, request.query_params)
    return JSONResponse(
        {"data": page, "has_more": more, "next_page": page[-1]["id"] if more and page else None}
    )


ROUTES = [
    Route("/tts/bytes", tts_bytes, methods=["POST"]),
    Route("/tts/sse", tts_sse, methods=["POST"]),
    Route("/voices", voices, methods=["GET"]),
    Route("/voices/", voices, methods=["GET"]),
]
