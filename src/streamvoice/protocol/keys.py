"""Where callers put their key, on every wire: ``Authorization`` (Bearer, or Deepgram's ``Token``) and the
vendors' key headers; the 401 hint that names them all. Which keys are good is the key ring's
(``store.keys``): this module only reads what a caller presented."""

from __future__ import annotations

from collections.abc import Callable

# What a 401 says on every route: the key header of each wire this server speaks, not only ours.
UNAUTHORIZED_HINT = (
    "send your key: Authorization: Bearer <key> (ElevenLabs clients: xi-api-key; Cartesia: "
    "X-API-Key; Deepgram: Authorization: Token <key>; from a browser: Cartesia's api_key query, "
    "Deepgram's subprotocols token, <key>, ElevenLabs' xi_api_key in the first message)"
)


# Where the vendors' clients put their key (ElevenLabs, Cartesia); ``Authorization`` also takes Deepgram's
# ``Token <key>`` scheme. A client changes its base URL and its key, not its code.
KEY_HEADERS = ("xi-api-key", "x-api-key")


def bearer_key(value: str | None, schemes: tuple[str, ...] = ("bearer",)) -> str | None:
    """The key in an ``Authorization`` value of one of these schemes, else None."""
    scheme, _, supplied = (value or "").partition(" ")
    return supplied.strip() or None if scheme.lower() in schemes else None


def presented_keys(header: Callable[[str], str | None]) -> list[str]:
    """Every key a request's headers carry, in the order they are tried: ``Authorization: Bearer`` (or
    Deepgram's ``Token``), then the vendors' key headers. Any one good key admits the caller, as the one
    tenant it names."""
    found = [bearer_key(header("authorization"), ("bearer", "token"))]
    found += [header(name) for name in KEY_HEADERS]
    return [key for key in found if key]
