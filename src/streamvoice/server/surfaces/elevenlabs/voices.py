"""ElevenLabs' voice lists, our voices in its shapes: ``GET /v1/voices`` (all of them) and ``GET /v2/voices``,
what ``voices.search()`` calls in every current ElevenLabs SDK (search, filters, sort and pages by
``next_page_token``). Every voice is "premade" (a default voice): a filter for other kinds finds none.
Checked by ``pytest tests/test_elevenlabs.py``."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from streamvoice.engine.voices import VoiceInfo
from streamvoice.protocol import ErrorCode, ProtocolError, whole_number
from streamvoice.server.surfaces.elevenlabs.request import http_error
from streamvoice.server.surfaces.guards import listing_service

MAX_PAGE = 100  # ElevenLabs' own cap on page_size
OURS = {"premade", "default", "saved"}  # the categories and voice types our voices answer to


def entry(voice: VoiceInfo) -> dict[str, Any]:
    return {
        "voice_id": voice.name,
        "name": voice.name,
        "category": "premade",
        "labels": {"language": voice.lang, "gender": voice.gender},
        "description": f"Kokoro-82M {voice.language} {voice.gender} voice",
        "preview_url": None,
    }


async def voices(request: Request) -> Response:
    """``GET /v1/voices``: every voice, one page."""
    try:
        service = listing_service(request)
    except ProtocolError as exc:
        return http_error(exc)
    listed = [entry(v) for v in service.engine.voices()]
    return JSONResponse({"voices": listed, "has_more": False, "total_count": len(listed)})


def _number(query: Any, name: str, default: int, most: int) -> int:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    value = whole_number(raw)
    if value is None or value > most:
        raise ProtocolError(
            ErrorCode.INVALID_FIELD, f"{name} must be a whole number up to {most}", param=name
        )
    return value


def _matches(voice: VoiceInfo, query: Any) -> bool:
    words = f"{voice.name} {voice.lang} {voice.language} {voice.gender} premade".lower()
    if (term := (query.get("search") or "").strip().lower()) and term not in words:
        return False
    for kind in ("category", "voice_type"):
        if (wanted := query.get(kind)) and wanted.lower() not in OURS:
            return False
    if (gender := query.get("gender")) and gender.lower() != voice.gender.lower():
        return False
    languages = [code.lower() for code in query.getlist("language") if code]
    if languages and not any(
        voice.lang.lower().startswith(code) or code in voice.language.lower() for code in languages
    ):
        return False
    ids = {i for raw in query.getlist("voice_ids") for i in raw.split(",") if i}
    return not ids or voice.name in ids


async def search_voices(request: Request) -> Response:
    """``GET /v2/voices``: ``search`` (name, language, gender), ``category`` / ``voice_type``, ``gender``,
    ``language``, ``voice_ids``, ``sort`` (``name``) and ``sort_direction``, ``page_size`` (at most 100,
    default 10) and ``next_page_token`` (the token the previous page returned)."""
    try:
        service = listing_service(request)
        query = request.query_params
        size = max(1, _number(query, "page_size", 10, MAX_PAGE))
        start = _number(query, "next_page_token", 0, 10**6)
        direction = (query.get("sort_direction") or "asc").lower()
        if direction not in ("asc", "desc"):
            raise ProtocolError(
                ErrorCode.INVALID_FIELD, "sort_direction is asc or desc", param="sort_direction"
            )
    except ProtocolError as exc:
        return http_error(exc)
    found = sorted(
        (v for v in service.engine.voices() if _matches(v, query)),
        key=lambda v: v.name,
        reverse=direction == "desc",
    )
    page = found[start : start + size]
    more = start + size < len(found)
    body = {
        "voices": [entry(v) for v in page],
        "has_more": more,
        "total_count": len(found),
        "next_page_token": str(start + size) if more else None,
    }
    return JSONResponse(body)
