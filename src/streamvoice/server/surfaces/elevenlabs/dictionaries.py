"""ElevenLabs' pronunciation-dictionary API, kept in the store (``core.dictionaries``), and the locators its
speech requests carry (``pronunciation_dictionary_locators``: HTTP bodies, the first message of
``stream-input`` and of each ``multi-stream-input`` context).

Routes as its SDK calls them (``client.pronunciation_dictionaries``): ``add-from-rules``, ``add-from-file``
(a PLS lexicon, multipart), list (cursor pages, sort, archived), get (with the latest version's rules),
``PATCH`` (name, archived), ``add-rules`` / ``remove-rules`` / ``set-rules`` (each a new version), and
``{id}/{version_id}/download`` (PLS). Alias rules and phoneme rules (``ipa``, ``cmu-arpabet``) are said through
the lexicon machinery (``rules``, ``text.dictionary_rules``); matching is whole words, the written case first, then any
case (``case_sensitive`` and ``word_boundaries`` are kept and answered back). Checked by
``pytest tests/test_dictionaries.py``.
"""

from __future__ import annotations

import time
from dataclasses import replace
from functools import partial
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from streamvoice.protocol import ErrorCode, ProtocolError, whole_number
from streamvoice.server.core.dictionaries import Dictionary, Shelf, checked_name
from streamvoice.server.core.requests import Prepare, ResolvedRequest
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.elevenlabs.request import http_error
from streamvoice.server.surfaces.elevenlabs.rules import elevenlabs_entry, pls_of_rules, pls_rules
from streamvoice.server.surfaces.kept import MAX_BODY_BYTES, form_body, json_body, kept_route
from streamvoice.store import shown_owner
from streamvoice.text.dictionary_rules import RuleError, lexicon_of

SHELF = Shelf("elevenlabs", "GET /v1/pronunciation-dictionaries", per_request=3)
RULE_FIELDS = (
    "type",
    "string_to_replace",
    "alias",
    "phoneme",
    "alphabet",
    "case_sensitive",
    "word_boundaries",
)
MAX_DESCRIPTION_CHARS = 1000


def _bad(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_FIELD, message)


def checked_rules(raw: object) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The caller's rules (only their known fields) and the lexicon they make, or what to send instead."""
    if not isinstance(raw, list) or not raw:
        raise _bad('"rules" must be a list of {"type": "alias", "string_to_replace", "alias"} or {"type": '
                   '"phoneme", "string_to_replace", "phoneme", "alphabet": "ipa" | "cmu-arpabet"}')  # fmt: skip
    try:
        lexicon = lexicon_of(raw, elevenlabs_entry)
    except RuleError as exc:
        raise _bad(str(exc)) from None
    return [{k: rule[k] for k in RULE_FIELDS if k in rule} for rule in raw], lexicon


def locators(raw: object) -> list[tuple[object, object]]:
    """``pronunciation_dictionary_locators`` as (id, version id or None for the latest)."""
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
        raise _bad(
            '"pronunciation_dictionary_locators" must be a list of {"pronunciation_dictionary_id", "version_id"}'
        )
    return [(x.get("pronunciation_dictionary_id"), x.get("version_id")) for x in raw]


def dictionaries_for(service: SpeechService, who: str, raw_locators: object) -> Prepare | None:
    """What lays the named dictionaries over a request's lexicon (``Dictionaries.laid_over``); the locators
    are checked now, the dictionaries fetched when it is awaited."""
    return service.dictionaries.laid_over(who, SHELF, locators(raw_locators))


async def with_dictionaries(
    service: SpeechService, request: ResolvedRequest, who: str, raw_locators: object
) -> ResolvedRequest:
    """The request with its dictionaries' words laid over the server's lexicon (an HTTP body, read whole)."""
    return await service.dictionaries.laid_over_now(request, who, SHELF, locators(raw_locators))


# --- answers in ElevenLabs' shapes ----------------------------------------------------------------------


def _metadata(d: Dictionary, who: str) -> dict[str, Any]:
    return {
        "id": d.id,
        "latest_version_id": d.latest.id,
        "latest_version_rules_num": len(d.latest.rules),
        "name": d.name,
        "permission_on_resource": "admin",
        "created_by": shown_owner(who),
        "creation_time_unix": d.created_unix,
        "archived_time_unix": d.archived_unix,
        "description": d.description,
    }


def _added(d: Dictionary, who: str) -> dict[str, Any]:
    return {
        "id": d.id,
        "name": d.name,
        "created_by": shown_owner(who),
        "creation_time_unix": d.created_unix,
        "version_id": d.latest.id,
        "version_rules_num": len(d.latest.rules),
        "description": d.description,
        "permission_on_resource": "admin",
    }


def _rules_changed(d: Dictionary) -> dict[str, Any]:
    return {"id": d.id, "version_id": d.latest.id, "version_rules_num": len(d.latest.rules)}


# --- routes ---------------------------------------------------------------------------------------------


def _description(raw: object) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str) or len(raw) > MAX_DESCRIPTION_CHARS:
        raise _bad(f'"description" must be text of at most {MAX_DESCRIPTION_CHARS} characters')
    return raw


async def add_from_rules(request: Request, service: SpeechService, who: str) -> Response:
    obj = await json_body(request)
    rules, lexicon = checked_rules(obj.get("rules"))
    made = await service.dictionaries.create(
        who, SHELF, checked_name(obj.get("name")), rules, lexicon, _description(obj.get("description"))
    )
    return JSONResponse(_added(made, who))


async def add_from_file(request: Request, service: SpeechService, who: str) -> Response:
    async with form_body(request, max_files=1, max_fields=8, max_part_size=MAX_BODY_BYTES) as form:
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            raise _bad('send the PLS lexicon as the multipart field "file"')
        document = await upload.read(MAX_BODY_BYTES + 1)
        name, description = form.get("name"), form.get("description")
    try:
        raw_rules: list[Any] = list(pls_rules(document))
    except RuleError as exc:
        raise _bad(str(exc)) from None
    rules, lexicon = checked_rules(raw_rules)
    made = await service.dictionaries.create(
        who, SHELF, checked_name(name), rules, lexicon, _description(description)
    )
    return JSONResponse(_added(made, who))


async def list_dictionaries(request: Request, service: SpeechService, who: str) -> Response:
    query = request.query_params
    size = whole_number(query.get("page_size", "30"))
    if size is None or not 1 <= size <= 100:
        raise _bad('"page_size" must be 1-100')
    start = whole_number(query.get("cursor") or "0")
    if start is None:
        raise _bad('"cursor" must be the next_cursor of the page before')
    found = await service.dictionaries.all(who, SHELF)
    if query.get("include_archived", "false").lower() != "true":
        found = [d for d in found if d.archived_unix is None]
    by_name = query.get("sort") == "name"
    descending = (
        query.get("sort_direction", "descending" if not by_name else "ascending").lower() == "descending"
    )
    if by_name:
        found.sort(key=lambda d: d.name.lower(), reverse=descending)
    else:
        found.sort(key=lambda d: d.created_unix, reverse=descending)
    page = found[start : start + size]
    more = start + size < len(found)
    return JSONResponse(
        {
            "pronunciation_dictionaries": [_metadata(d, who) for d in page],
            "next_cursor": str(start + size) if more else None,
            "has_more": more,
        }
    )


async def get_dictionary(request: Request, service: SpeechService, who: str) -> Response:
    found = await service.dictionaries.get(who, SHELF, request.path_params["dictionary_id"])
    return JSONResponse({**_metadata(found, who), "rules": found.latest.rules})


async def update_dictionary(request: Request, service: SpeechService, who: str) -> Response:
    """``PATCH``: a new name, or archived (or not); the rules and their version stay."""
    obj = await json_body(request)
    name = checked_name(obj["name"]) if obj.get("name") is not None else None
    if (archived := obj.get("archived")) is not None and not isinstance(archived, bool):
        raise _bad('"archived" must be true or false')

    def edit(found: Dictionary) -> Dictionary:
        if name is not None:
            found = replace(found, name=name)
        if archived is not None:
            since = (found.archived_unix or int(time.time())) if archived else None
            found = replace(found, archived_unix=since)
        return found

    changed = await service.dictionaries.change(who, SHELF, request.path_params["dictionary_id"], edit)
    return JSONResponse(_metadata(changed, who))


async def change_rules(request: Request, service: SpeechService, who: str, how: str) -> Response:
    """``add-rules`` (a rule for a word already there replaces it), ``remove-rules`` (``rule_strings``),
    ``set-rules``: each a new version."""
    obj = await json_body(request)
    strings: list[str] = []
    new: list[dict[str, Any]] = []
    if how == "remove-rules":
        strings = obj.get("rule_strings")  # type: ignore[assignment]
        if not isinstance(strings, list) or not all(isinstance(x, str) for x in strings):
            raise _bad('"rule_strings" must be a list of the strings whose rules go')
    else:
        new, _ = checked_rules(obj.get("rules"))

    def edit(found: Dictionary) -> Dictionary:
        """The change on the rules as they are now (read again if another change came first)."""
        current = found.latest.rules
        if how == "remove-rules":
            kept = [r for r in current if r.get("string_to_replace") not in strings]
            if not kept:
                raise _bad(
                    "a dictionary keeps at least one rule: delete what is left with set-rules, or archive it"
                )
            return found.revised(*checked_rules(kept))
        replaced = {r["string_to_replace"] for r in new}
        base = (
            [] if how == "set-rules" else [r for r in current if r.get("string_to_replace") not in replaced]
        )
        return found.revised(*checked_rules([*base, *new]))

    revised = await service.dictionaries.change(who, SHELF, request.path_params["dictionary_id"], edit)
    return JSONResponse(_rules_changed(revised))


async def download(request: Request, service: SpeechService, who: str) -> Response:
    found = await service.dictionaries.get(who, SHELF, request.path_params["dictionary_id"])
    version = found.version(request.path_params["version_id"])
    return Response(pls_of_rules(version.rules), media_type="application/pls+xml")


PREFIX = "/v1/pronunciation-dictionaries"
ROUTES = [
    Route(f"{PREFIX}/add-from-rules", kept_route(http_error, add_from_rules), methods=["POST"]),
    Route(f"{PREFIX}/add-from-file", kept_route(http_error, add_from_file), methods=["POST"]),
    Route(PREFIX, kept_route(http_error, list_dictionaries), methods=["GET"]),
    Route(PREFIX + "/", kept_route(http_error, list_dictionaries), methods=["GET"]),
    Route(PREFIX + "/{dictionary_id}", kept_route(http_error, get_dictionary), methods=["GET"]),
    Route(PREFIX + "/{dictionary_id}", kept_route(http_error, update_dictionary), methods=["PATCH"]),
    *(
        Route(f"{PREFIX}/{{dictionary_id}}/{how}", kept_route(http_error, partial(change_rules, how=how)),
              methods=["POST"])
        for how in ("add-rules", "remove-rules", "set-rules")
    ),
    Route(PREFIX + "/{dictionary_id}/{version_id}/download", kept_route(http_error, download), methods=["GET"]),
]  # fmt: skip
