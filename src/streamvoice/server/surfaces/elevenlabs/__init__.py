"""ElevenLabs' text-to-speech API on the speech server, so its SDKs and the frameworks' ElevenLabs plugins
reach Kokoro by changing their base URL.

- ``WS /v1/text-to-speech/{voice_id}/stream-input``: one context; ``{"text": " "}`` opens it, text
  follows as it is written (``"flush": true`` speaks what is buffered), ``{"text": ""}`` ends it; the answer
  is ``{"audio", "alignment", "normalizedAlignment"}`` messages, then ``{"isFinal": true}`` and a close.
- ``WS /v1/text-to-speech/{voice_id}/multi-stream-input``: the same with ``context_id`` on every message,
  ``{"context_id", "close_context": true}`` (its text is spoken, then ``isFinal``), ``{"close_socket": true}``;
  ``{"text": ""}`` is a keep-alive. A context that gets words while an older, closed one still speaks takes
  the voice (its clients close a context to interrupt it and open the next).
- ``POST /v1/text-to-speech/{voice_id}`` (and ``/stream``): audio; ``/with-timestamps`` (one JSON object)
  and ``/stream/with-timestamps`` (a JSON object per line): base64 audio with character times.
- ``GET /v1/voices``, ``GET /v2/voices`` (``voices.search()``: search, filters, pages) and, with
  ``xi-api-key``, ``GET /v1/models`` in ElevenLabs' shapes.

Alignment follows the wire: on the WebSocket each message's character times are relative to that
message's audio (the client keeps the running clock); over HTTP they run from the start of the answer, in
seconds. ``output_format`` is any the SDK names: ``pcm_<rate>``, ``wav_<rate>``, ``ulaw_8000``, ``alaw_8000``, ``mp3_<rate>_<kbps>`` or ``opus_48000_<kbps>``. The key
goes in ``xi-api-key`` and carries the server's AUTH_TOKEN; ``model_id`` is accepted and answered as Kokoro.
Errors are ElevenLabs' ``{"detail": {"status", "message"}}`` over HTTP and ``{"message", "error"}`` on the
socket. Checked by ``pytest tests/test_elevenlabs.py``.
"""

from streamvoice.protocol import KeyForms
from streamvoice.server.surfaces.elevenlabs.alignment import characters, message_chars, ws_alignment
from streamvoice.server.surfaces.elevenlabs.http import ROUTES, models
from streamvoice.server.surfaces.elevenlabs.request import error_shape
from streamvoice.server.surfaces.wire import Wire

WIRE = Wire(
    "elevenlabs",
    ROUTES,
    keys=KeyForms(
        headers=("xi-api-key",),
        queries=("xi-api-key",),
        hint="ElevenLabs clients: xi-api-key, from a browser xi_api_key in the first message",
    ),
    error_shape=error_shape,
    paths=("/v1/text-to-speech/", "/v1/pronunciation-dictionaries", "/v1/user/"),
    not_found_hints=(("/v1/text-to-speech/", " (a voice id never contains '/': GET /v1/voices lists them)"),),
    models=models,
)

__all__ = ["ROUTES", "WIRE", "characters", "error_shape", "message_chars", "models", "ws_alignment"]
