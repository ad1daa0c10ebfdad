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

from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.dictionaries import Dictionary, Shelf, checked_name
from streamvoice.server.core.requests import Prepare, ResolvedRequest
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.cartesia.rules import cartesia_entry
from streamvoice.server.surfaces.cartesia.shapes import cursor_page, http_error
from streamvoice.server.surfaces.kept import json_body, kept_route
from streamvoice.store import shown_owner
from streamvoice.text.dictionary_rules import RuleError, lexicon_of

SHELF = Shelf("cartesia", "GET /pronunciation-dicts/", per_request=1)


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


def _located(dictionary_id: object) -> list[tuple[object, object]]:
    """``pronunciation_dict_id`` as locators: its latest version, or none."""
    return [] if dictionary_id is None else [(dictionary_id, None)]


def dictionary_for(service: SpeechService, who: str, dictionary_id: object) -> Prepare | None:
    """What lays the named dictionary over a request's lexicon (``Dictionaries.laid_over``), fetched when it
    is awaited."""
    return service.dictionaries.laid_over(who, SHELF, _located(dictionary_id))


async def with_dictionary(
    service: SpeechService, request: ResolvedRequest, who: str, dictionary_id: object
) -> ResolvedRequest:
    """The request with its dictionary's words laid over the server's lexicon (an HTTP body, read whole)."""
    return await service.dictionaries.laid_over_now(request, who, SHELF, _located(dictionary_id))


def _shown(d: Dictionary, who: str) -> dict[str, Any]:
    return {
        "id": d.id,
        "name": d.name,
        "created_at": datetime.fromtimestamp(d.created_unix, UTC).isoformat().replace("+00:00", "Z"),
        "items": d.latest.rules,
        "owner_id": shown_owner(who),
        "pinned": bool(d.extra.get("pinned", False)),
    }


async def create(request: Request, service: SpeechService, who: str) -> Response:
    obj = await json_body(request)
    items, lexicon = checked_items(obj.get("items"))
    made = await service.dictionaries.create(who, SHELF, checked_name(obj.get("name")), items, lexicon,
                                             id_prefix="pdict_")  # fmt: skip
    return JSONResponse(_shown(made, who))


async def list_dicts(request: Request, service: SpeechService, who: str) -> Response:
    found = [_shown(d, who) for d in await service.dictionaries.all(who, SHELF)]
    page, more = cursor_page(found, request.query_params)
    return JSONResponse({"data": page, "has_more": more})


async def retrieve(request: Request, service: SpeechService, who: str) -> Response:
    found = await service.dictionaries.get(who, SHELF, request.path_params["dict_id"])
    return JSONResponse(_shown(found, who))


async def update(request: Request, service: SpeechService, who: str) -> Response:
    """A new name and/or new items (the items replace the old ones)."""
    obj = await json_body(request)
    name = checked_name(obj["name"]) if obj.get("name") is not None else None
    # new items are a new version (the name with them: one write)
    items = checked_items(obj["items"]) if obj.get("items") is not None else None

    def edit(found: Dictionary) -> Dictionary:
        if name is not None:
            found = replace(found, name=name)
        return found.revised(*items) if items is not None else found

    changed = await service.dictionaries.change(who, SHELF, request.path_params["dict_id"], edit)
    return JSONResponse(_shown(changed, who))


async def delete(request: Request, service: SpeechService, who: str) -> Response:
    await service.dictionaries.delete(who, SHELF, request.path_params["dict_id"])
    return Response(status_code=204)


ROUTES = [
    Route("/pronunciation-dicts", kept_route(http_error, create), methods=["POST"]),
    Route("/pronunciation-dicts/", kept_route(http_error, create), methods=["POST"]),
    Route("/pronunciation-dicts", kept_route(http_error, list_dicts), methods=["GET"]),
    Route("/pronunciation-dicts/", kept_route(http_error, list_dicts), methods=["GET"]),
    Route("/pronunciation-dicts/{dict_id}", kept_route(http_error, retrieve), methods=["GET"]),
    Route("/pronunciation-dicts/{dict_id}", kept_route(http_error, update), methods=["PATCH"]),
    Route("/pronunciation-dicts/{dict_id}", kept_route(http_error, delete), methods=["DELETE"]),
]
