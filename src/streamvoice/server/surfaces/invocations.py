"""``POST /invocations``, SageMaker's one-shot door: one synthesize request in, its audio streamed back piece
by piece, or SSE events (``"stream": "sse"`` or ``Accept: text/event-stream``) for
InvokeEndpointWithResponseStream callers. Checked by ``pytest tests/test_invocations.py``."""

from __future__ import annotations

import base64
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from streamvoice.audio.encoders import media_type
from streamvoice.engine.alignment import as_json
from streamvoice.protocol import ErrorCode, ProtocolError, Synthesize, message_from_object
from streamvoice.server.core.piece_audio import Words
from streamvoice.server.core.requests import ResolvedRequest, SessionDefaults
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.http_answer import start_answer
from streamvoice.server.surfaces.http_body import Body, sse_event


async def _invocation(obj: dict[str, Any], service: SpeechService) -> tuple[ResolvedRequest, bool]:
    """``POST /invocations``: one synthesize message (``type`` optional); SSE when ``"stream": "sse"``."""
    stream = obj.pop("stream", None)
    if stream not in (None, False, "sse"):
        raise ProtocolError(
            ErrorCode.INVALID_FIELD,
            '"stream" on POST /invocations is "sse" (events) or absent (audio); streamed text needs the '
            "WebSocket session",
        )
    sse = stream == "sse"
    obj.setdefault("type", "synthesize")
    msg = message_from_object(obj, service.config.limits)
    if not isinstance(msg, Synthesize):
        raise ProtocolError(ErrorCode.UNKNOWN_TYPE, "POST /invocations takes one synthesize request")
    return service.requests.message(msg, SessionDefaults()), sse


async def invocations(request: Request) -> Response:
    started = await start_answer(request, _invocation)
    if isinstance(started, Response):
        return started
    resolved = started.resolved
    if started.parsed or "text/event-stream" in request.headers.get("accept", ""):
        return started.respond(Events(resolved), "text/event-stream")
    return started.respond(Body(), media_type(resolved.format, resolved.sample_rate))


class Events(Body):
    """Audio as SSE events with base64 data, for InvokeEndpointWithResponseStream callers; each piece's word
    times as an ``alignment`` event before its audio."""

    def __init__(self, request: ResolvedRequest) -> None:
        self.request = request
        self.seq = 0

    def opening(self) -> list[bytes]:
        start = {
            "type": "audio_start",
            "format": self.request.format,
            "sample_rate": self.request.sample_rate,
        }
        return [sse_event(start)]

    def words(self, words: Words) -> list[bytes]:
        return [sse_event({"type": "alignment", "words": as_json(words.times)})]

    def audio(self, data: bytes, samples: int) -> list[bytes]:
        chunk = {"type": "audio_chunk", "seq": self.seq, "data": base64.b64encode(data).decode("ascii")}
        self.seq += 1
        return [sse_event(chunk)]

    def done(self) -> list[bytes]:
        return [sse_event({"type": "audio_end", "chunks": self.seq})]


ROUTES = [Route("/invocations", invocations, methods=["POST"])]
