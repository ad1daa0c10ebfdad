"""A WebSocket wire's upgrade, for every wire: the key before anything else (a caller without it learns
nothing about the server and gets 403), the session cap counted before any ``await`` (simultaneous callers
cannot all pass it), the wire's own checks of the URL, then the connection; a refusal in the wire's shape
with one close-code rule. Checked by ``pytest tests/test_slots.py`` and each wire's tests."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from starlette.websockets import WebSocket

from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.service import SpeechService
from streamvoice.server.core.slots import reserve
from streamvoice.server.surfaces.connection import Connection
from streamvoice.server.surfaces.guards import authorized, service_of


def close_code(error: ProtocolError) -> int:
    """The one rule for closing a refused WebSocket: 1001 shutting down, 1013 try again later (busy, not
    ready), 1008 fix the call (a bad voice, format or key)."""
    if error.code == ErrorCode.GOING_AWAY:
        return 1001
    return 1013 if error.http_status >= 500 else 1008


async def serve(
    ws: WebSocket,
    make: Callable[[WebSocket, SpeechService, str], Connection[Any]],
    refusal: Callable[[ProtocolError], str | bytes],
    connection_id: Callable[[WebSocket], str | None] = lambda ws: None,
) -> None:
    """A WebSocket connection's life, for every wire: the key before the upgrade (a caller without it learns
    nothing about the server and gets 403), the session cap counted before any await (simultaneous callers
    cannot all pass it), the wire's own checks of the URL (``make``), then the connection."""
    service = service_of(ws)
    if not authorized(ws, service):
        await ws.close(1008, "unauthorized")  # before accept(): the upgrade is refused with HTTP 403
        return
    try:
        slot = reserve(service, "session")
    except ProtocolError as problem:
        await _refuse(ws, problem, refusal)
        return
    assert service is not None
    try:
        conn = make(ws, service, connection_id(ws) or uuid.uuid4().hex[:12])
    except ProtocolError as problem:
        slot.release()
        service.metrics.count_error(str(problem.code))
        await _refuse(ws, problem, refusal)
        return
    try:
        await ws.accept()
        await conn.run()
    finally:
        slot.release()


async def _refuse(
    ws: WebSocket, problem: ProtocolError, refusal: Callable[[ProtocolError], str | bytes]
) -> None:
    """Why no connection starts, in the wire's shape, then the close (``close_code``)."""
    await ws.accept()
    frame = refusal(problem)
    await (ws.send_text(frame) if isinstance(frame, str) else ws.send_bytes(frame))
    await ws.close(close_code(problem), str(problem.code).replace("_", " "))
