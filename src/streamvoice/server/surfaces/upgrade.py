"""A WebSocket wire's upgrade, for every wire: the key before anything else (a caller without it learns
nothing about the server and gets 403), the session cap counted before any ``await`` (simultaneous callers
cannot all pass it), the wire's own checks of the URL, then the connection; a refusal in the wire's shape
with one close-code rule.

A browser cannot set headers on a WebSocket, so each vendor's browser clients put the key elsewhere
(``BrowserKey``): Cartesia's in the query (``api_key``, ``access_token``), Deepgram's as the subprotocols
``token, KEY`` (the scheme is echoed back on accept, or the browser closes the socket), ElevenLabs' as
``xi_api_key`` in the first message. Nothing is reserved for a caller before its key is checked: a socket
waiting for its first message is accepted, counted apart (``Doorway``: at most ``max_keyless_sockets``,
each for at most ``body_timeout_s``, then 1008) and holds no session room, so keyless sockets can never
fill the server for callers with the key (``tests/test_browser_keys.py::test_keyless_sockets_take_no_room``).
No key is ever logged, by any logger (``log_redaction``). Checked by ``pytest tests/test_browser_keys.py``
and each wire's tests."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core import rooms
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.connection import Connection
from streamvoice.server.surfaces.guards import admits, authorized, key_forms, service_of
from streamvoice.server.surfaces.websocket import frame_of

Frame = str | bytes


@dataclass(frozen=True)
class BrowserKey:
    """Where a wire's browser clients put their key."""

    query: tuple[str, ...] = ()  # query parameters
    subprotocols: tuple[str, ...] = ()  # schemes offered as the subprotocols [scheme, KEY]
    # The key a wire's first message carries (ElevenLabs' ``xi_api_key``), read from that frame; None: none.
    first_message: Callable[[Frame], object] | None = None


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
    ready, a tenant's share taken), 1008 fix the call (a bad voice, format or key)."""
    if error.code == ErrorCode.GOING_AWAY:
        return 1001
    return 1013 if error.http_status >= 500 or error.http_status == 429 else 1008


async def serve(
    ws: WebSocket,
    make: Callable[[WebSocket, SpeechService, str], Connection[Any, Any]],
    refusal: Callable[[ProtocolError], str | bytes],
    connection_id: Callable[[WebSocket], str | None] = lambda ws: None,
    browser: BrowserKey = BrowserKey(),
) -> None:
    """A WebSocket connection's life, for every wire: the key before anything is reserved (a caller without
    it learns nothing about the server: 403, or for a first-message key 1008 once its first message came
    without it), the session cap counted before any await (simultaneous callers cannot all pass it), the
    wire's own checks of the URL (``make``), then the connection."""
    service = service_of(ws)
    key, subprotocol = offered(ws, browser)
    ok = authorized(ws, service, key)
    # A wrong key anywhere is refused now; only a caller that presented none may bring it in a first message.
    presented = key is not None or key_forms(ws).carries_one(ws.headers.get)
    if not ok and (presented or browser.first_message is None or service is None):
        await ws.close(1008, "unauthorized")  # before accept(): the upgrade is refused with HTTP 403
        return
    first: Frame | None = None
    if not ok:
        assert browser.first_message is not None and service is not None
        first = await _first_message_with_key(ws, service, browser.first_message, subprotocol)
        if first is None:
            return  # refused and closed: nothing was reserved
    try:
        room = rooms.take(service, "session")
    except ProtocolError as problem:
        await _refuse(ws, problem, refusal, subprotocol)
        return
    assert service is not None
    try:
        await room.claim()  # the tenant's cap across replicas
        conn = make(ws, service, connection_id(ws) or uuid.uuid4().hex[:12])
    except ProtocolError as problem:
        room.release()
        service.metrics.count_error(str(problem.code))
        await _refuse(ws, problem, refusal, subprotocol)
        return
    conn.seat.hold(room)  # from here its seat gives the room back, with everything else, on its way out
    await _accept(ws, subprotocol)
    await conn.run(first)


async def _first_message_with_key(
    ws: WebSocket, service: SpeechService, key_of: Callable[[Frame], object], subprotocol: str | None
) -> Frame | None:
    """The first message, when it carries the key (it is then the connection's first frame); None when the
    socket was closed instead: the doorway full (1013), no message within ``body_timeout_s``, or a message
    without the key (1008: nothing is answered to a caller without it)."""
    doorway = service.doorway
    if not doorway.enter():
        service.metrics.count_error("keyless_sockets_full")
        await ws.close(1013, "too many sockets waiting for their key")  # before accept: HTTP 403
        return None
    try:
        await ws.accept(subprotocol=subprotocol)
        try:
            async with asyncio.timeout(service.config.body_timeout_s):
                message = await ws.receive()
        except TimeoutError:
            message = {"type": "websocket.receive"}  # no message in time: as one without the key
        if (frame := frame_of(message)) is None:
            return None
        if admits(service, [key_of(frame)]):
            return frame
        service.metrics.count_error(str(ErrorCode.UNAUTHORIZED))
        await ws.close(1008, "unauthorized")
        return None
    except (WebSocketDisconnect, RuntimeError, OSError):
        return None
    finally:
        doorway.leave()


async def _accept(ws: WebSocket, subprotocol: str | None) -> None:
    """Accept, unless the socket was accepted already (while its first message brought the key)."""
    if ws.application_state == WebSocketState.CONNECTING:
        await ws.accept(subprotocol=subprotocol)


async def _refuse(
    ws: WebSocket,
    problem: ProtocolError,
    refusal: Callable[[ProtocolError], str | bytes],
    subprotocol: str | None = None,
) -> None:
    """Why no connection starts, in the wire's shape, then the close (``close_code``)."""
    await _accept(ws, subprotocol)
    frame = refusal(problem)
    await (ws.send_text(frame) if isinstance(frame, str) else ws.send_bytes(frame))
    await ws.close(close_code(problem), str(problem.code).replace("_", " "))
