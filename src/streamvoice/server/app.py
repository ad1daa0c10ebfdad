"""The speech server's ASGI app: the SageMaker container contract plus metrics.

- ``GET /ping``: readiness, 200 only after the model loaded *and* a warm-up synthesis produced audio, and
  not while draining.
- ``GET /live``: liveness, 200 whenever the process serves requests (warm-up and drain included).
- ``POST /invocations``: one complete input, streamed back piece by piece.
- ``WS /invocations-bidirectional-stream``: one long-lived session, many messages.
- ``GET /metrics``: Prometheus text.
- OpenAI's speech API and Kokoro-FastAPI's captioned speech (``server/surfaces/openai/speech.py``).
- With ``wyoming_uri``: Home Assistant's Wyoming protocol on its own socket (``server/surfaces/wyoming/handler.py``).

Routes are plain functions over the state the lifespan yields (Starlette hands it to each request as
``request.state``): the service, once the model is loaded. One guard says why new work cannot start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from streamvoice import log_redaction
from streamvoice.asgi import ASGIApp, BodyLimit, Receive, Scope, Send, error_response
from streamvoice.engine.kokoro import KokoroEngine
from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.config import ServerConfig
from streamvoice.server.core.config_docs import startup_notes
from streamvoice.server.core.metrics import Metrics
from streamvoice.server.core.rooms import holding, unavailable
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces import cartesia, deepgram, elevenlabs, invocations, keys, openai
from streamvoice.server.surfaces.guards import listing_service, service_of
from streamvoice.server.surfaces.openai import speech as openai_api
from streamvoice.server.surfaces.session import socket as session
from streamvoice.server.surfaces.vendor_voices import vendor_voices
from streamvoice.server.surfaces.wire import Wire, error_shapes, key_forms, shape_of, wire_at
from streamvoice.server.surfaces.wyoming.listener import WyomingServer
from streamvoice.store import Store, StoreError, open_store
from streamvoice.store.keys import Keyring

log = logging.getLogger("streamvoice.server")


def create_app(config: ServerConfig | None = None, engine: KokoroEngine | None = None) -> Starlette:
    config = config or ServerConfig.from_env()
    log_redaction.install()  # however the app is run: no key in any log line
    store = open_store(config.store_url)  # connected at its first use
    keyring = Keyring(store, config.auth_token)  # the body guard checks keys before the service exists

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        try:
            await keyring.refresh()  # every key made so far holds from the first request
        except StoreError:
            log.warning("the key records could not be read at start: only AUTH_TOKEN holds until they are")
        service = await _start_service(config, engine, store, keyring)
        app.state.service = service  # the drain (runner) reaches it here
        # Wyoming listens from the start and answers not_ready until warm-up is done, like /ping.
        wyoming = WyomingServer(config.wyoming_uri, service) if config.wyoming_uri else None
        if wyoming is not None:
            await wyoming.start()
        if config.warm_up:
            await service.warm_up()
        else:
            service.ready = True
        log.info("speech server ready (providers %s)", service.engine.providers)
        for warning, line in startup_notes(config, os.environ):
            (log.warning if warning else log.info)("%s", line)
        try:
            yield {"service": service}
        finally:
            service.ready = False
            if wyoming is not None:
                await wyoming.stop()
            service.stop()
            with contextlib.suppress(StoreError):
                await service.tenancy.write_use()  # what unbounded tenants used since the last write
            await service.dictionaries.close()

    app = Starlette(
        routes=ROUTES,
        lifespan=lifespan,
        middleware=[
            Middleware(Holding),
            Middleware(
                BodyLimit,
                max_bytes=config.max_body_bytes,
                keys=keyring,
                timeout_s=config.body_timeout_s,
                shapes=error_shapes(WIRES),
                forms=KEY_FORMS,
            ),
        ],
        exception_handlers={404: not_found, 405: not_found},
    )
    app.state.key_forms = KEY_FORMS  # every route's key check reads it (``guards.key_forms``)
    return app


async def _start_service(
    config: ServerConfig, engine: KokoroEngine | None, store: Store, keyring: Keyring
) -> SpeechService:
    """The engine (loaded off the event loop unless given) and the service over it, checked and started."""
    if engine is None:
        engine = await asyncio.to_thread(
            KokoroEngine.load, config.model_dir, config.model_variant, config.engine_options
        )
    metrics = Metrics(config.endpoint_name if config.emf else None)
    service = SpeechService(engine, config, metrics, store, keyring)
    vendor_voices(service).check()  # a bad vendor voice map stops the start, before a caller finds it
    _gauges(service)
    service.start()
    return service


def _gauges(service: SpeechService) -> None:
    """What ``/metrics`` reads at each scrape, from the service's live state."""
    metrics, admission = service.metrics, service.admission
    metrics.queue_depth = lambda: service.scheduler.queue_depth
    metrics.active_sessions = lambda: service.rooms.sessions
    metrics.active_streams = lambda: service.rooms.streams
    metrics.busy_sessions = lambda: sum(1 for s in service.connections if s.busy)
    metrics.draining = lambda: service.draining
    metrics.capacity_sessions = service.config.max_sessions
    metrics.listeners = lambda: {
        "capacity": admission.capacity,
        "admitted": admission.admitted,
        "queued": admission.queued,
        "headroom": admission.headroom,
    }
    metrics.decoder_batches = lambda: service.engine.batch_counts
    metrics.pace = lambda: service.load.pace


class Holding:
    """Each request and each connection owns every room taken while it is served (``rooms.holding``):
    whatever a surface did not give back is given back when it ends, however it ends."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        with holding(f"{scope['type']} {str(scope.get('path', ''))[:100]}"):
            await self.app(scope, receive, send)


async def not_found(request: Request, exc: Exception) -> Response:
    """No such route (or method), in the error shape of the wire its path belongs to, never Starlette's plain
    text: a voice id with "/" in it took ElevenLabs' clients to a bare "Not Found"."""
    path = request.url.path
    status = getattr(exc, "status_code", 404)
    what = "this route does not take that method" if status == 405 else "this server has no such route"
    wire = wire_at(WIRES, path)
    hint = next((h for prefix, h in wire.not_found_hints if path.startswith(prefix)), "") if wire else ""
    error = ProtocolError(ErrorCode.NOT_FOUND, f"{request.method} {path[:100]}: {what}{hint}")
    return JSONResponse(shape_of(wire)(error), status_code=status)


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


async def models(request: Request) -> Response:
    """``GET /v1/models``: a wire's own list for its clients (they send its key header), OpenAI's otherwise."""
    for wire in WIRES:
        if wire.models is not None and any(h in request.headers for h in wire.keys.headers):
            return await wire.models(request)
    return await openai_api.models(request)


# The wires this server speaks, one line each: a wire's folder declares its routes, key forms and error shape.
WIRES: tuple[Wire, ...] = (
    Wire("invocations", invocations.ROUTES),
    Wire("session", session.ROUTES),
    elevenlabs.WIRE,
    cartesia.WIRE,
    deepgram.WIRE,
    openai.WIRE,
    Wire("keys", keys.ROUTES),
)
KEY_FORMS = key_forms(WIRES)

# Every route the speech server answers (the handlers above and each wire's own).
ROUTES = [
    Route("/ping", ping, methods=["GET"]),
    Route("/live", live, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
    Route("/v1/models", models, methods=["GET"]),
    *(route for wire in WIRES for route in wire.routes),
]
