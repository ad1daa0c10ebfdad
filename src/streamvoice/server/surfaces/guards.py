"""Who may start work over HTTP or a WebSocket: the key, checked one way for every web surface, and the
service the lifespan yielded. What the server can take now is ``core.slots``."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from streamvoice.protocol import KEY_HEADERS, UNAUTHORIZED_HINT, ErrorCode, ProtocolError, key_authorized
from streamvoice.server.core.service import SpeechService
from streamvoice.store import owner

BROWSER_KEY_QUERY = ("api_key", "access_token", "xi-api-key")  # where browser clients put a key


def unauthorized() -> ProtocolError:
    """A fresh error each time (a shared instance raised again and again rebinds its traceback), naming the
    key header of every wire this server speaks."""
    return ProtocolError(ErrorCode.UNAUTHORIZED, UNAUTHORIZED_HINT)


def service_of(conn: HTTPConnection) -> SpeechService | None:
    """The service the lifespan yielded (Starlette copies it into each request's state)."""
    return getattr(conn.state, "service", None)


def listing_service(conn: HTTPConnection) -> SpeechService:
    """The service for a route that only reads its state (voices, metrics): behind the token, and there
    once the model is loaded; otherwise the ``ProtocolError`` to answer in the route's shape."""
    service = service_of(conn)
    if not authorized(conn, service):
        raise unauthorized()
    if service is None:
        raise ProtocolError(ErrorCode.NOT_READY, "the server is starting")
    return service


def authorized(conn: HTTPConnection, service: SpeechService | None) -> bool:
    token = service.config.auth_token if service is not None else None
    return key_authorized(conn.headers.get, token)


def caller(conn: HTTPConnection, key: object = None) -> str:
    """Whose a pronunciation dictionary is, as a digest: with AUTH_TOKEN set, the key the server verified
    (the token), never a header it did not check: ``xi-api-key: TOKEN`` beside ``Authorization: Bearer
    anything`` once gave each such value an allowance of its own. Without a token nothing is verified, and
    each presented key (``key`` when a wire's first message carried it; else ``Authorization``'s, a vendor's
    key header, or a browser client's query) keeps its own, within the bounds on all (``core.dictionaries``)."""
    service = service_of(conn)
    if service is not None and service.config.auth_token:
        return owner(service.config.auth_token)  # the only key a caller who got here can have presented
    if isinstance(key, str) and key:
        return owner(key)
    _, _, supplied = (conn.headers.get("authorization") or "").partition(" ")
    found = supplied or next((conn.headers[h] for h in KEY_HEADERS if conn.headers.get(h)), None)
    found = found or next((conn.query_params[q] for q in BROWSER_KEY_QUERY if conn.query_params.get(q)), None)
    return owner(found)
