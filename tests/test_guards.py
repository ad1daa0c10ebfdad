"""``server.surfaces.guards``: who may start work over HTTP or a WebSocket; errors are fresh values."""

from __future__ import annotations

from streamvoice.protocol import ErrorCode, ProtocolError


def test_each_refusal_is_a_fresh_error_naming_every_wires_key_header() -> None:
    from starlette.applications import Starlette
    from starlette.requests import HTTPConnection

    from streamvoice.server.app import KEY_FORMS
    from streamvoice.server.surfaces.guards import unauthorized

    app = Starlette()
    app.state.key_forms = KEY_FORMS
    conn = HTTPConnection({"type": "http", "app": app, "headers": [], "path": "/", "query_string": b""})
    first, second = unauthorized(conn), unauthorized(conn)
    assert first is not second and first.code == second.code == "unauthorized"
    for header in ("Authorization: Bearer", "xi-api-key", "X-API-Key", "Authorization: Token"):
        assert header in first.message


def test_naming_an_error_for_a_message_leaves_the_original_as_it_was() -> None:
    original = ProtocolError(ErrorCode.SERVER_BUSY, "no listener slot is free")
    named = original.naming(id="m1")
    assert (named.id, named.code, named.message) == ("m1", original.code, original.message)
    assert original.id is None and named.naming(param="voice").id == "m1"
