"""Who may start work, and whether the server can take it now: one answer for every surface (the session
protocol, ``/invocations``, the OpenAI routes and Wyoming), so limits and auth never drift apart."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from streamvoice.protocol import ErrorCode, ProtocolError, bearer_authorized
from streamvoice.server.service import SpeechService

UNAUTHORIZED = ProtocolError(ErrorCode.UNAUTHORIZED, "send Authorization: Bearer <token>")


def service_of(conn: HTTPConnection) -> SpeechService | None:
    """The service the lifespan yielded (Starlette copies it into each request's state)."""
    return getattr(conn.state, "service", None)


def unavailable(service: SpeechService | None, new_work: bool = True) -> ProtocolError | None:
    """Why the server cannot take this now: shutting down, still loading, or (for new work) full."""
    if service is not None and service.draining:
        return ProtocolError(ErrorCode.GOING_AWAY, "the server is shutting down; retry on another instance")
    if service is None or not service.ready:
        return ProtocolError(ErrorCode.NOT_READY, "model is loading or warming up; retry after /ping is 200")
    metrics, cap = service.metrics, service.config.max_sessions
    if new_work and metrics.active_sessions + metrics.active_streams >= cap:
        return ProtocolError(
            ErrorCode.SERVER_BUSY, f"the server holds {cap} sessions and streams; retry later"
        )
    return None


def authorized(conn: HTTPConnection, service: SpeechService | None) -> bool:
    token = service.config.auth_token if service is not None else None
    return bearer_authorized(conn.headers.get("authorization"), token)
