"""Cartesia's pronunciation-dictionary API (``client.pronunciation_dicts``), kept in the store
(``core.dictionaries``), and ``pronunciation_dict_id`` on its speech requests.

Items are ``{"text", "alias"}`` (``pronunciation`` in its newer docs is read too); an alias is a sounds-like
respelling or IPA as ``<<ˈ|b|ɑ|ˈ|j|u>>``, said through the lexicon machinery (``text.dictionary_rules``):
whole words, the written case first, then any case. Checked by ``pytest tests/test_dictionaries.py``.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from streamvoice.protocol import ErrorCode, Limits, ProtocolError, parse_json_object
from streamvoice.server.core.dictionaries import Dictionary, checked_name
from streamvoice.server.core.requests import ResolvedRequest
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.cartesia.shapes import cursor_page, http_error
from streamvoice.server.surfaces.guards import caller, listing_service
from streamvoice.text.dictionary_rules import RuleError, cartesia_entry, lexicon_of

VENDOR = "cartesia"
MAX_BODY_BYTES = 256 * 1024


def _bad(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_FIELD, message)


def checked_items(raw: object) -> tuple[list[dict[str, Any]], dict[str, str]]:
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise _bad('"items" must be a list of {"text": "...", "alias": "..."}')
    try:
        lexicon = lexicon_of(raw, cartesia_entry)
    except RuleError as exc:
        raise _bad(str(exc)) from None
    items = []
    for item in raw:
        kept = {"text": item["text"], "alias": item.get("alias", item.get("pronunciation"))}
        if isinstance(item.get("case_sensitive"), bool):
            kept["case_sensitive"] = item["case_sensitive"]
        items.append(kept)
    return items, lexicon


async def with_dictionary(
    service: SpeechService, request: ResolvedRequest, who: str, dictionary_id: object
) -> ResolvedRequest:
    """The request with its dictionary's words laid over the server's lexicon."""
    if dictionary_id is None:
        return request
    lexicon = await service.dictionaries.lexicon(who, VENDOR, [(dictionary_id, None)])
    return replace(request, lexicon={**request.lexicon, **lexicon})


def _shown(d: Dictionary, who: str) -> dict[str, Any]:
    return {
        "id": d.id,
        "name": d.name,
        "created_at": datetime.fromtimestamp(d.created_unix, UTC).isoformat().replace("+00:00", "Z"),
        "items": d.latest.rules,
        "owner_id": who,
        "pinned": bool(d.extra.get("pinned", False)),
    }


async def _body(request: Request) -> dict[str, Any]:
    return parse_json_object(await request.body(), Limits(max_message_bytes=MAX_BODY_BYTES))


async def create(request: Request) -> Response:
    try:
        service, who = listing_service(request), caller(request)
        obj = await _body(request)
        items, lexicon = checked_items(obj.get("items"))
        made = await service.dictionaries.create(who, VENDOR, checked_name(obj.get("name")), items, lexicon,
                                                 id_prefix="pdict_")  # fmt: skip
    except ProtocolError as exc:
        return http_error(exc)
    return JSONResponse(_shown(made, who))


async def list_dicts(request: Request) -> Response:
    try:
        service, who = listing_service(request), caller(request)
        found = [_shown(d, who) for d in await service.dictionaries.all(who, VENDOR)]
    except ProtocolError as exc:
        return http_error(exc)
    page, more = cursor_page(found, request.query_params)
    return JSONResponse({"data": page, "has_more": more})


async def retrieve(request: Request) -> Response:
    try:
        service, who = listing_service(request), caller(request)
        found = await service.dictionaries.get(who, VENDOR, request.path_params["dict_id"])
    except ProtocolError as exc:
        return http_error(exc)
    return JSONResponse(_shown(found, who))


async def update(request: Request) -> Response:
    """A new name and/or new items (the items replace the old ones)."""
    try:
        service, who = listing_service(request), caller(request)
        obj = await _body(request)
        found = await service.dictionaries.get(who, VENDOR, request.path_params["dict_id"])
        if obj.get("name") is not None:
            found = replace(found, name=checked_name(obj["name"]))
            await service.dictionaries.save(who, VENDOR, found)
        if obj.get("items") is not None:
            items, lexicon = checked_items(obj["items"])
            found = await service.dictionaries.revise(who, VENDOR, found, items, lexicon)
    except ProtocolError as exc:
        return http_error(exc)
    return JSONResponse(_shown(found, who))


async def delete(request: Request) -> Response:
    try:
        service, who = listing_service(request), caller(request)
        await service.dictionaries.delete(who, VENDOR, request.path_params["dict_id"])
    except ProtocolError as exc:
        return http_error(exc)
    return Response(status_code=204)


ROUTES = [
    Route("/pronunciation-dicts", create, methods=["POST"]),
    Route("/pronunciation-dicts/", create, methods=["POST"]),
    Route("/pronunciation-dicts", list_dicts, methods=["GET"]),
    Route("/pronunciation-dicts/", list_dicts, methods=["GET"]),
    Route("/pronunciation-dicts/{dict_id}", retrieve, methods=["GET"]),
    Route("/pronunciation-dicts/{dict_id}", update, methods=["PATCH"]),
    Route("/pronunciation-dicts/{dict_id}", delete, methods=["DELETE"]),
]
