"""Cartesia's text-to-speech API on the speech server, so its SDK and the frameworks' Cartesia plugins
reach Kokoro by changing their base URL.

- ``WS /tts/websocket``: generation requests ``{"context_id", "transcript", "continue", "voice": {"mode":
  "id", "id"}, "output_format": {"container": "raw", "encoding", "sample_rate"}, "add_timestamps",
  "language"}``; a context's transcripts are joined as sent (spaces are the caller's), ``"continue": false``
  ends it, ``"flush": true`` speaks what is buffered, ``{"context_id", "cancel": true}`` stops it. Answers:
  ``chunk`` (base64 audio, with the ``flush_id`` it belongs to), ``timestamps`` (words, start and end in
  seconds from the context's start), ``flush_done`` (its ``flush_id``, once what came before the flush is
  spoken), then ``done``; or ``error``.
- ``POST /tts/bytes``: the audio (``raw``, ``wav`` or ``mp3``); ``POST /tts/sse``: the same events as SSE.
- ``GET /voices``: our voices in Cartesia's page shape.
- ``/pronunciation-dicts/`` (create, list, retrieve, update, delete) and ``pronunciation_dict_id`` on every
  speech route (``cartesia/dictionaries.py``).

Encodings ``pcm_s16le``, ``pcm_f32le``, ``pcm_mulaw``, ``pcm_alaw`` at the rate asked. The key goes in
``X-API-Key`` or ``Authorization: Bearer`` and carries the server's AUTH_TOKEN; ``Cartesia-Version`` and
``model_id`` are accepted (any). Checked by ``pytest tests/test_cartesia.py`` and ``tests/test_dictionaries.py``.
"""

from streamvoice.protocol import KeyForms
from streamvoice.server.surfaces.cartesia.dictionaries import ROUTES as DICTIONARY_ROUTES
from streamvoice.server.surfaces.cartesia.http import ROUTES as HTTP_ROUTES
from streamvoice.server.surfaces.cartesia.shapes import error_shape
from streamvoice.server.surfaces.cartesia.tts import BROWSER_KEY
from streamvoice.server.surfaces.cartesia.tts import ROUTES as SOCKET_ROUTES
from streamvoice.server.surfaces.wire import Wire

ROUTES = [*SOCKET_ROUTES, *HTTP_ROUTES, *DICTIONARY_ROUTES]
WIRE = Wire(
    "cartesia",
    ROUTES,
    keys=KeyForms(
        headers=("x-api-key",),
        queries=BROWSER_KEY.query,
        hint="Cartesia: X-API-Key, from a browser the api_key query",
    ),
    error_shape=error_shape,
    paths=("/tts/", "/pronunciation-dicts"),
)

__all__ = ["ROUTES", "WIRE", "error_shape"]
