"""``POST /invocations``, SageMaker's one-shot door: one synthesize request in, its audio streamed back piece
by piece, or SSE events (``"stream": "sse"`` or ``Accept: text/event-stream``) for
InvokeEndpointWithResponseStream callers. Checked by ``pytest tests/test_invocations.py``."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from streamvoice.audio.encoders import media_type
from streamvoice.protocol import ErrorCode, ProtocolError, Synthesize, message_from_object
from streamvoice.server.core.requests import ResolvedRequest, SessionDefaults
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.http_answer import start_answer
from streamvoice.server.surfaces.http_stream import sse_body


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
        return started.respond(sse_body(resolved, started.chunks()), "text/event-stream")
    return started.respond(None, media_type(resolved.format, resolved.sample_rate))


ROUTES = [Route("/invocations", invocations, methods=["POST"])]
