"""Deepgram's text-to-speech APIs on the speech server: Aura (``/v1/speak``, ``aura``) and Flux
(``/v2/speak``, ``flux``: turns whose interruption says what was heard), with the query, the REST call and
the error shapes they share (``request``)."""

from streamvoice.server.surfaces.deepgram import aura, flux
from streamvoice.server.surfaces.deepgram.request import error_shape

ROUTES = [*aura.ROUTES, *flux.ROUTES]

__all__ = ["ROUTES", "error_shape"]
