"""Keys managed over HTTP, with the bootstrap key (``AUTH_TOKEN``) alone: ``POST /v1/keys`` makes one
(``{"name", "listeners"?, "chars_per_day"?, "expires_in_s"?}``; the key is in this answer and nowhere
after), ``GET /v1/keys`` lists them (never a key or its digest), ``DELETE /v1/keys/{name}`` revokes one
(every replica refuses it within seconds, and closes its sockets). ``GET /v1/keys/me``: any key's own
record and today's use. The same as ``streamvoice keys`` on the command line. Checked by ``pytest
tests/test_tenants.py``."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from streamvoice.asgi import error_response
from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.service import SpeechService
from streamvoice.server.core.tenancy import current, next_day_at
from streamvoice.server.surfaces.kept import json_body, kept_route
from streamvoice.store.keys import KeyRecords, Tenant

FIELDS = ("name", "listeners", "chars_per_day", "expires_in_s")


def _admin(service: SpeechService) -> KeyRecords:
    tenant = current()
    if tenant is None or not tenant.admin:
        raise ProtocolError(
            ErrorCode.FORBIDDEN,
            "keys are managed with the server's AUTH_TOKEN (or `streamvoice keys` where the store is reached)",
        )
    assert service.keyring.records is not None
    return service.keyring.records


def _bound(obj: dict[str, object], field: str) -> int | None:
    value = obj.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 1 or value != int(value):
        raise ProtocolError(
            ErrorCode.INVALID_FIELD,
            f'"{field}" is a whole number of at least 1 (leave it out for none)',
            param=field,
        )
    return int(value)


async def create(request: Request, service: SpeechService, owner: str) -> Response:
    records = _admin(service)
    obj = await json_body(request)
    if unknown := sorted(set(obj) - set(FIELDS)):
        raise ProtocolError(
            ErrorCode.INVALID_FIELD, f"unknown field(s) {unknown[:5]}: a key takes {list(FIELDS)}"
        )
    name = obj.get("name")
    if not isinstance(name, str):
        raise ProtocolError(ErrorCode.INVALID_FIELD, '"name" (a string) names the key', param="name")
    expires_in = _bound(obj, "expires_in_s")
    try:
        key, record = await records.create(
            name,
            _bound(obj, "listeners"),
            _bound(obj, "chars_per_day"),
            None if expires_in is None else time.time() + expires_in,
        )
    except ValueError as exc:
        raise ProtocolError(ErrorCode.INVALID_FIELD, str(exc), param="name") from None
    await service.keyring.refresh()  # this replica knows it at once; the others within REFRESH_S
    return JSONResponse({"key": key, **record.shown()}, status_code=201)


async def listed(request: Request, service: SpeechService, owner: str) -> Response:
    records = _admin(service)
    return JSONResponse({"keys": [r.shown() for r in await records.list()]})


async def revoke(request: Request, service: SpeechService, owner: str) -> Response:
    records = _admin(service)
    name = request.path_params["name"]
    if not await records.revoke(name):
        raise ProtocolError(ErrorCode.NOT_FOUND, f"no key is named {name[:70]!r}: GET /v1/keys lists them")
    await service.keyring.refresh()  # its sockets here close now; on the other replicas within REFRESH_S
    return Response(status_code=204)


async def me(request: Request, service: SpeechService, owner: str) -> Response:
    tenant = current()
    if tenant is None:
        raise ProtocolError(ErrorCode.NOT_FOUND, "this server has no keys: every caller is anonymous")
    return JSONResponse(await usage(service, tenant))


async def usage(service: SpeechService, tenant: Tenant) -> dict[str, object]:
    """A tenant's share and today's use (characters counted on every replica)."""
    return {
        "name": tenant.name,
        "listeners": tenant.listeners,
        "listeners_held": service.tenancy.held.get(tenant.name, 0),
        "chars_per_day": tenant.chars_per_day,
        "chars_today": await service.tenancy.used_today(tenant),
        "resets_at": next_day_at(time.time()),
    }


ROUTES = [
    Route("/v1/keys", kept_route(error_response, create), methods=["POST"]),
    Route("/v1/keys", kept_route(error_response, listed), methods=["GET"]),
    Route("/v1/keys/me", kept_route(error_response, me), methods=["GET"]),
    Route("/v1/keys/{name}", kept_route(error_response, revoke), methods=["DELETE"]),
]
