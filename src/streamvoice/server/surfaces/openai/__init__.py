"""OpenAI's speech API (``speech``) and Kokoro-FastAPI's captioned speech (``captioned``), whose clients
speak OpenAI's error shape: the server's default."""

from streamvoice.server.surfaces.openai import captioned, speech
from streamvoice.server.surfaces.wire import Wire

WIRE = Wire("openai", [*speech.ROUTES, *captioned.ROUTES])

__all__ = ["WIRE"]
