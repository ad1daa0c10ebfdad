"""Deepgram's text-to-speech APIs on the speech server: Aura (``/v1/speak``, ``aura``) and Flux
(``/v2/speak``, ``flux``: turns whose interruption says what was heard), with the query, the REST call and
the error shapes they share (``request``)."""

from streamvoice.protocol import KeyForms
from streamvoice.server.surfaces.deepgram import aura, flux
from streamvoice.server.surfaces.deepgram.request import error_shape
from streamvoice.server.surfaces.wire import Wire

ROUTES = [*aura.ROUTES, *flux.ROUTES]
WIRE = Wire(
    "deepgram",
    ROUTES,
    keys=KeyForms(
        schemes=("token",),
        hint="Deepgram: Authorization: Token <key>, from a browser the subprotocols token, <key>",
    ),
    error_shape=error_shape,
    paths=("/v1/speak", "/v2/speak"),
)

__all__ = ["ROUTES", "WIRE", "error_shape"]
