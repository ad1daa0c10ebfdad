"""Routes over what a caller keeps in the store (the vendors' pronunciation-dictionary APIs): the one way
each answers. Behind the token, with the service there and the caller known (``guards``); a body read as one
bounded JSON object; any ``ProtocolError`` answered in the wire's own error shape."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from streamvoice.protocol import ErrorCode, Limits, ProtocolError, parse_json_object
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.guards import caller, listing_service

MAX_BODY_BYTES = 256 * 1024  # a dictionary of 512 rules, with room

type KeptHandler = Callable[[Request, SpeechService, str], Awaitable[Response]]


def kept_route(
    render: Callable[[ProtocolError], Response], handler: KeptHandler
) -> Callable[[Request], Awaitable[Response]]:
    """``handler(request, service, caller)`` as a route: a ``ProtocolError`` it raises, or the guards raise,
    is the answer in ``render``'s shape."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request, listing_service(request), caller(request))
        except ProtocolError as exc:
            return render(exc)

    return endpoint


async def json_body(request: Request) -> dict[str, Any]:
    return parse_json_object(await request.body(), Limits(max_message_bytes=MAX_BODY_BYTES))


@contextlib.asynccontextmanager
async def form_body(request: Request, **limits: int) -> AsyncIterator[FormData]:
    """A multipart body, its parts closed after; a body Starlette cannot read is ``invalid_field`` in the
    wire's shape (its own 400 is plain text no vendor SDK reads)."""
    try:
        form = await request.form(**limits)  # type: ignore[arg-type]
    except HTTPException as exc:
        raise ProtocolError(
            ErrorCode.INVALID_FIELD,
            f"the multipart body could not be read ({str(exc.detail)[:120]}): send the file as "
            "multipart/form-data with its fields",
        ) from None
    try:
        yield form
    finally:
        await form.close()
