"""A WebSocket wire's upgrade, for every wire: the key before anything else (a caller without it learns
nothing about the server and gets 403), the session cap counted before any ``await`` (simultaneous callers
cannot all pass it), the wire's own checks of the URL, then the connection; a refusal in the wire's shape
with one close-code rule.

A browser cannot set headers on a WebSocket, so each vendor's browser clients put the key elsewhere
(``BrowserKey``): Cartesia's in the query (``api_key``, ``access_token``), Deepgram's as the subprotocols
``token, KEY`` (the scheme is echoed back on accept, or the browser closes the socket), ElevenLabs' as
``xi_api_key`` in the first message (the socket is accepted and closed 1008 if the first message, due
within ``BODY_TIMEOUT_S``, does not carry it). No key is ever logged, by any logger (``log_redaction``).
Checked by ``pytest tests/test_browser_keys.py`` and each wire's tests."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.websockets import WebSocket

from streamvoice.protocol import KEY_HEADERS, ErrorCode, ProtocolError, key_matches
from streamvoice.server.core.service import SpeechService
from streamvoice.server.core.slots import reserve
from streamvoice.server.surfaces.connection import Connection
from streamvoice.server.surfaces.guards import authorized, service_of


@dataclass(frozen=True)
class BrowserKey:
    """Where a wire's browser clients put their key."""

    query: tuple[str, ...] = ()  # query parameters
    subprotocols: tuple[str, ...] = ()  # schemes offered as the subprotocols [scheme, KEY]
    first_message: bool = False  # the wire's first message carries it (``Connection.first_frame_key``)


def offered(ws: WebSocket, browser: BrowserKey) -> tuple[str | None, str | None]:
    """(the key a browser sent, the subprotocol to echo back on accept), either None."""
    for name in browser.query:
        if (key := ws.query_params.get(name)) is not None:
            return key, None
    offered_protocols = [p.strip() for p in ws.scope.get("subprotocols") or []]
    if len(offered_protocols) >= 2 and offered_protocols[0].lower() in browser.subprotocols:
        return offered_protocols[1], offered_protocols[0]
    return None, None


def close_code(error: ProtocolError) -> int:
    """The one rule for closing a refused WebSocket: 1001 shutting down, 1013 try again later (busy, not
    ready), 1008 fix the call (a bad voice, format or key)."""
    if error.code == ErrorCode.GOING_AWAY:
        return 1001
    return 1013 if error.http_status >= 500 else 1008


async def serve(
    ws: WebSocket,
    make: Callable[[WebSocket, SpeechService, str], Connection[Any, Any]],
    refusal: Callable[[ProtocolError], str | bytes],
    connection_id: Callable[[WebSocket], str | None] = lambda ws: None,
    browser: BrowserKey = BrowserKey(),
) -> None:
    """A WebSocket connection's life, for every wire: the key before the upgrade (a caller without it learns
    nothing about the server and gets 403), the session cap counted before any await (simultaneous callers
    cannot all pass it), the wire's own checks of the URL (``make``), then the connection."""
    service = service_of(ws)
    key, subprotocol = offered(ws, browser)
    token = service.config.auth_token if service is not None else None
    ok = authorized(ws, service) or (key is not None and key_matches(key, token))
    # A wrong key anywhere is refused now; only a caller that presented none may bring it in a first message.
    presented = key is not None or any(ws.headers.get(h) for h in ("authorization", *KEY_HEADERS))
    if not ok and (presented or not browser.first_message):
        await ws.close(1008, "unauthorized")  # before accept(): the upgrade is refused with HTTP 403
        return
    try:
        slot = reserve(service, "session")
    except ProtocolError as problem:
        await _refuse(ws, problem, refusal, subprotocol)
        return
    assert service is not None
    try:
        conn = make(ws, service, connection_id(ws) or uuid.uuid4().hex[:12])
    except ProtocolError as problem:
        slot.release()
        service.metrics.count_error(str(problem.code))
        await _refuse(ws, problem, refusal, subprotocol)
        return
    if not ok:
        conn.key_due = token  # the first message must carry it
    try:
        await ws.accept(subprotocol=subprotocol)
        await conn.run()
    finally:
        slot.release()


async def _refuse(
    ws: WebSocket,
    problem: ProtocolError,
    refusal: Callable[[ProtocolError], str | bytes],
    subprotocol: str | None = None,
) -> None:
    """Why no connection starts, in the wire's shape, then the close (``close_code``)."""
    await ws.accept(subprotocol=subprotocol)
    frame = refusal(problem)
    await (ws.send_text(frame) if isinstance(frame, str) else ws.send_bytes(frame))
    await ws.close(close_code(problem), str(problem.code).replace("_", " "))
