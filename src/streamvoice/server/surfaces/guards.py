"""Who may start work over HTTP or a WebSocket: the key, checked one way for every web surface against the
key ring (the bootstrap ``AUTH_TOKEN`` and every key record), and the service the lifespan yielded. A good
key makes its tenant the one this request or connection serves (``tenancy.serving``). What the server can
take now is ``core.rooms``."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from streamvoice.protocol import BEARER_ONLY, ErrorCode, KeyForms, ProtocolError
from streamvoice.server.core.service import SpeechService
from streamvoice.server.core.tenancy import current, serving
from streamvoice.store import owner


def key_forms(conn: HTTPConnection) -> KeyForms:
    """Where the server's wires take a key (``server.app`` joins what each mounted wire declares)."""
    forms = getattr(conn.app.state, "key_forms", None) if "app" in conn.scope else None
    return forms if isinstance(forms, KeyForms) else BEARER_ONLY


def unauthorized(conn: HTTPConnection) -> ProtocolError:
    """A fresh error each time (a shared instance raised again and again rebinds its traceback), naming the
    key form of every wire this server speaks."""
    return ProtocolError(ErrorCode.UNAUTHORIZED, key_forms(conn).unauthorized_hint())


def service_of(conn: HTTPConnection) -> SpeechService | None:
    """The service the lifespan yielded (Starlette copies it into each request's state)."""
    return getattr(conn.state, "service", None)


def listing_service(conn: HTTPConnection) -> SpeechService:
    """The service for a route that only reads its state (voices, metrics): behind the token, and there
    once the model is loaded; otherwise the ``ProtocolError`` to answer in the route's shape."""
    service = service_of(conn)
    if not authorized(conn, service):
        raise unauthorized(conn)
    if service is None:
        raise ProtocolError(ErrorCode.NOT_READY, "the server is starting")
    return service


def authorized(conn: HTTPConnection, service: SpeechService | None, *keys: object) -> bool:
    """The caller presented a good key (``keys`` a browser put elsewhere, then the headers' keys), or the
    server needs none; a good key's tenant is now the one served."""
    if service is None:
        return True  # still starting: nothing can be done yet, and the route says so
    return admits(service, [*keys, *key_forms(conn).presented(conn.headers.get)])


def admits(service: SpeechService, keys: list[object]) -> bool:
    """One of ``keys`` is good (the first good one's tenant is now the one served), or the server needs
    none: every key form on every wire is judged here, a first message's too (``upgrade``)."""
    tenant = service.keyring.resolve([k for k in keys if isinstance(k, str)])
    if tenant is not None:
        serving(tenant)
        return True
    return not service.keyring.required


def caller(conn: HTTPConnection, key: object = None) -> str:
    """Whose a record (a pronunciation dictionary, a named lexicon) is, as a digest: the tenant of the key
    the server verified, never a header it did not check (``xi-api-key: KEY`` beside ``Authorization: Bearer
    anything`` once gave each such value an allowance of its own). Without keys nothing is verified, and
    each presented key (``key`` when a wire's first message carried it; else ``Authorization``'s, a vendor's
    key header, or a browser client's query) keeps its own, within the bounds on all (``core.dictionaries``)."""
    if (tenant := current()) is not None:
        return tenant.owner
    if isinstance(key, str) and key:
        return owner(key)
    _, _, supplied = (conn.headers.get("authorization") or "").partition(" ")
    forms = key_forms(conn)
    found = supplied or next((conn.headers[h] for h in forms.headers if conn.headers.get(h)), None)
    found = found or next((conn.query_params[q] for q in forms.queries if conn.query_params.get(q)), None)
    return owner(found)
