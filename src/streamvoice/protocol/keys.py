"""Where callers put the server's key, on every wire: ``Authorization`` (Bearer, or Deepgram's ``Token``), the
vendors' key headers, and a browser's key checked in constant time; the 401 hint that names them all."""

from __future__ import annotations

import hmac
from collections.abc import Callable

# What a 401 says on every route: the key header of each wire this server speaks, not only ours.
UNAUTHORIZED_HINT = (
    "send the server's token: Authorization: Bearer <token> (ElevenLabs clients: xi-api-key; Cartesia: "
    "X-API-Key; Deepgram: Authorization: Token <token>; from a browser: Cartesia's api_key query, "
    "Deepgram's subprotocols token, <token>, ElevenLabs' xi_api_key in the first message)"
)


# Where the vendors' clients put their key (ElevenLabs, Cartesia); ``Authorization`` also takes Deepgram's
# ``Token <key>`` scheme. Each carries the server's AUTH_TOKEN: a client changes its base URL, not its code.
KEY_HEADERS = ("xi-api-key", "x-api-key")


def key_authorized(header: Callable[[str], str | None], token: str | None) -> bool:
    """The token in ``Authorization: Bearer`` (or Deepgram's ``Token``) or a vendor's key header."""
    if not token:
        return True
    scheme, _, supplied = (header("authorization") or "").partition(" ")
    if scheme.lower() in ("bearer", "token") and hmac.compare_digest(supplied.encode(), token.encode()):
        return True
    return any(hmac.compare_digest((header(k) or "").encode(), token.encode()) for k in KEY_HEADERS)


def key_matches(supplied: object, token: str | None) -> bool:
    """A key a browser client sent where no header can be set (a query parameter, a subprotocol, a first
    message): the token, compared in constant time; no token configured means open."""
    if not token:
        return True
    return isinstance(supplied, str) and hmac.compare_digest(supplied.encode(), token.encode())


def bearer_authorized(header: str | None, token: str | None) -> bool:
    """``Authorization: Bearer <token>`` check, in constant time; no token configured means open."""
    if not token:
        return True
    scheme, _, supplied = (header or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(supplied.encode(), token.encode())
