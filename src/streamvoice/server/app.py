"""The speech server's ASGI app: the SageMaker container contract plus metrics.

- ``GET /ping``: readiness, 200 only after the model loaded *and* a warm-up synthesis produced audio, and
  not while draining.
- ``GET /live``: liveness, 200 whenever the process serves requests (warm-up and drain included).
- ``POST /invocations``: one complete input, streamed back piece by piece.
- ``WS /invocations-bidirectional-stream``: one long-lived session, many messages.
- ``GET /metrics``: Prometheus text.
- OpenAI's speech API and Kokoro-FastAPI's captioned speech (``server/openai_api.py``).
- With ``wyoming_uri``: Home Assistant's Wyoming protocol on its own socket (``server/wyoming.py``).

Routes are plain functions over the state the lifespan yields (Starlette hands it to each request as
``request.state``): the service, once the model is loaded. One guard says why new work cannot start.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from streamvoice.asgi import BodyLimit, error_response
from streamvoice.audio.encoders import media_type
from streamvoice.engine.kokoro import KokoroEngine
from streamvoice.protocol import (
    WS_PATH,
    ErrorCode,
    ErrorEvent,
    ProtocolError,
    Synthesize,
    encode_event,
    message_from_object,
)
from streamvoice.server import captioned, cartesia, deepgram, elevenlabs, openai_api
from streamvoice.server.config import ServerConfig, startup_notes
from streamvoice.server.guards import authorized, listing_service, reserve, service_of, unavailable
from streamvoice.server.http_front import start_answer
from streamvoice.server.metrics import Metrics
from streamvoice.server.requests import ResolvedRequest, SessionDefaults
from streamvoice.server.service import SpeechService
from streamvoice.server.session import BidiSession
from streamvoice.server.streams import TimedStream, audio_body, sse_body
from streamvoice.server.wyoming_server import WyomingServer

log = logging.getLogger("streamvoice.server")

# WebSocket close code for each reason a session is refused after the upgrade.
CLOSE_CODES = {ErrorCode.GOING_AWAY: 1001, ErrorCode.NOT_READY: 1013, ErrorCode.SERVER_BUSY: 1013}


def create_app(config: ServerConfig | None = None, engine: KokoroEngine | None = None) -> Starlette:
    config = config or ServerConfig.from_env()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        eng = engine
        if eng is None:
            eng = await asyncio.to_thread(
                KokoroEngine.load, config.model_dir, config.model_variant, config.engine_options
            )
        service = SpeechService(eng, config, Metrics(config.endpoint_name if config.emf else None))
        service.metrics.queue_depth = lambda: service.scheduler.queue_depth
        service.metrics.busy_sessions = lambda: sum(1 for s in service.sessions if s.busy)
        service.metrics.draining = lambda: service.draining
        service.metrics.capacity_sessions = config.max_sessions
        admission = service.admission
        service.metrics.listeners = lambda: {
            "capacity": admission.capacity,
            "admitted": admission.admitted,
            "queued": admission.queued,
            "headroom": admission.headroom,
        }
        service.metrics.decoder_batches = lambda: eng.batch_counts
        service.start()
        app.state.service = service  # the drain (runner) reaches it here
        # Wyoming listens from the start and answers not_ready until warm-up is done, like /ping.
        wyoming = WyomingServer(config.wyoming_uri, service) if config.wyoming_uri else None
        if wyoming is not None:
            await wyoming.start()
        if config.warm_up:
            await service.warm_up()
        else:
            service.ready = True
        log.info("speech server ready (providers %s)", eng.providers)
        for warning, line in startup_notes(config, os.environ):
            (log.warning if warning else log.info)("%s", line)
        try:
            yield {"service": service}
        finally:
            service.ready = False
            if wyoming is not None:
                await wyoming.stop()
            service.stop()

    return Starlette(
        routes=[
            Route("/ping", ping, methods=["GET"]),
            Route("/live", live, methods=["GET"]),
            Route("/invocations", invocations, methods=["POST"]),
            Route("/metrics", metrics, methods=["GET"]),
            WebSocketRoute(WS_PATH, bidi),
            *elevenlabs.ROUTES,  # before OpenAI's: GET /v1/models answers in ElevenLabs' shape to its clients
            *cartesia.ROUTES,
            *deepgram.ROUTES,
            *openai_api.ROUTES,
            *captioned.ROUTES,
        ],
        lifespan=lifespan,
        middleware=[
            Middleware(
                BodyLimit,
                max_bytes=config.max_body_bytes,
                token=config.auth_token,
                timeout_s=config.body_timeout_s,
                shapes=(
                    ("/v1/text-to-speech/", elevenlabs.error_shape),
                    ("/tts/", cartesia.error_shape),
                    ("/v1/speak", deepgram.error_shape),
                ),
            )
        ],
    )


# --- routes ---------------------------------------------------------------------------------------------


async def ping(request: Request) -> Response:
    problem = unavailable(service_of(request), new_work=False)
    return error_response(problem) if problem else JSONResponse({"status": "ok"})


async def live(request: Request) -> Response:
    """The process answers: a supervisor must not restart it while it loads or drains."""
    service = service_of(request)
    state = (
        "draining" if service and service.draining else "ready" if service and service.ready else "starting"
    )
    return JSONResponse({"status": "alive", "state": state})


async def metrics(request: Request) -> Response:
    # Load and error counts tell an outsider what the server is doing: behind the token when one is set.
    try:
        service = listing_service(request)
    except ProtocolError as exc:
        return error_response(exc)
    return PlainTextResponse(service.metrics.render(), media_type="text/plain; version=0.0.4")


def _invocation(obj: dict[str, Any], service: SpeechService) -> tuple[ResolvedRequest, bool]:
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
    resolved, service = started.resolved, started.service
    sse = started.parsed or "text/event-stream" in request.headers.get("accept", "")
    body = (sse_body if sse else audio_body)(resolved, started.first, started.pieces)
    media = "text/event-stream" if sse else media_type(resolved.format, resolved.sample_rate)
    return TimedStream(body, media, service.metrics, service.config.send_timeout_s, on_close=started.release)


async def bidi(ws: WebSocket) -> None:
    service = service_of(ws)
    # The token is checked before the upgrade and before anything else: a caller without it learns
    # nothing about the server's state (ready, draining, busy) and never gets a session.
    if not authorized(ws, service):
        await ws.close(1008, "unauthorized")  # before accept(): the upgrade is refused with HTTP 403
        return
    try:
        slot = reserve(service, "session")  # before the accept's await: the cap holds for simultaneous ones
    except ProtocolError as problem:
        await ws.accept()
        await ws.send_text(encode_event(ErrorEvent(str(problem.code), problem.message)))
        await ws.close(CLOSE_CODES.get(ErrorCode(problem.code), 1013), str(problem.code).replace("_", " "))
        return
    assert service is not None
    try:
        await ws.accept()
        session_id = ws.headers.get("x-amzn-sagemaker-session-id") or uuid.uuid4().hex[:12]
        await BidiSession(ws, service, session_id).run()
    finally:
        slot.release()
