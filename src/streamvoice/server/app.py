"""The speech server's ASGI app: the SageMaker container contract plus metrics.

- ``GET /ping``: 200 only after the model loaded *and* a warm-up synthesis produced audio.
- ``POST /invocations``: one complete input, streamed back piece by piece.
- ``WS /invocations-bidirectional-stream``: one long-lived session, many messages.
- ``GET /metrics``: Prometheus text.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing, asynccontextmanager
from typing import Any

import numpy as np
from numpy.typing import NDArray
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.types import Send
from starlette.websockets import WebSocket

from streamvoice.asgi import BodyLimit
from streamvoice.audio.encoders import MEDIA_TYPES, make_encoder
from streamvoice.engine.kokoro import KokoroEngine
from streamvoice.protocol import (
    SAMPLE_RATE,
    WS_PATH,
    ErrorCode,
    ErrorEvent,
    ProtocolError,
    Synthesize,
    bearer_authorized,
    encode_event,
    error_body,
    message_from_object,
)
from streamvoice.server.config import ServerConfig
from streamvoice.server.metrics import Metrics
from streamvoice.server.service import ResolvedRequest, SessionDefaults, SpeechService
from streamvoice.server.session import BidiSession

log = logging.getLogger("streamvoice.server")


def _error(status: int, code: ErrorCode, message: str, retry_after_s: int | None = None) -> JSONResponse:
    headers = {"retry-after": str(retry_after_s)} if retry_after_s is not None else None
    return JSONResponse(error_body(code, message), status_code=status, headers=headers)


class _TimedStream(StreamingResponse):
    """A streamed answer that gives up on a client that reads nothing for ``send_timeout_s`` and is counted
    against the server's session cap while it lasts (an unread stream holds decoded audio like a session)."""

    def __init__(self, body: AsyncGenerator[bytes], media_type: str, metrics: Metrics, timeout_s: float):
        super().__init__(body, media_type=media_type)
        self._metrics = metrics
        self._timeout_s = timeout_s
        self._body = body

    async def stream_response(self, send: Send) -> None:
        async def timed_send(message: Any) -> None:
            await asyncio.wait_for(send(message), timeout=self._timeout_s)

        try:
            await super().stream_response(timed_send)
        except TimeoutError:
            log.warning("POST /invocations: client stopped reading for %.0f s; closing", self._timeout_s)
            self._metrics.count_error("slow_consumer")
        finally:
            self._metrics.active_streams -= 1
            await self._body.aclose()


def create_app(config: ServerConfig | None = None, engine: KokoroEngine | None = None) -> Starlette:
    config = config or ServerConfig.from_env()
    metrics = Metrics()
    state: dict[str, SpeechService] = {}

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        eng = (
            engine
            if engine is not None
            else await asyncio.to_thread(KokoroEngine.load, config.model_dir, config.model_variant)
        )
        service = SpeechService(eng, config, metrics)
        metrics.queue_depth = lambda: service.scheduler.queue_depth
        service.start()
        state["service"] = service
        app.state.service = service
        if config.warm_up:
            await service.warm_up()
        else:
            service.ready = True
        log.info("speech server ready (providers %s)", eng.providers)
        try:
            yield
        finally:
            service.ready = False
            service.stop()

    async def ping(request: Request) -> Response:
        service = state.get("service")
        if service is not None and service.draining:
            return _error(503, ErrorCode.GOING_AWAY, "the server is shutting down")
        if service is None or not service.ready:
            return _error(503, ErrorCode.NOT_READY, "model is loading or warming up")
        return JSONResponse({"status": "ok"})

    async def metrics_route(request: Request) -> Response:
        # Load and error counts tell an outsider what the server is doing: behind the token when one is set.
        if not bearer_authorized(request.headers.get("authorization"), config.auth_token):
            return _error(401, ErrorCode.UNAUTHORIZED, "send Authorization: Bearer <token>")
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4")

    async def invocations(request: Request) -> Response:
        service = state.get("service")
        if not bearer_authorized(request.headers.get("authorization"), config.auth_token):
            return _error(401, ErrorCode.UNAUTHORIZED, "send Authorization: Bearer <token>")
        if service is not None and service.draining:
            return _error(503, ErrorCode.GOING_AWAY, "the server is shutting down; retry on another instance")
        if service is None or not service.ready:
            return _error(
                503, ErrorCode.NOT_READY, "model is loading or warming up; retry after /ping returns 200"
            )
        if metrics.active_sessions + metrics.active_streams >= config.max_sessions:
            return _error(
                503,
                ErrorCode.SERVER_BUSY,
                f"the server holds {config.max_sessions} sessions and streams already; retry later",
                retry_after_s=1,
            )
        body = await request.body()
        if len(body) > config.max_message_bytes:
            return _error(
                413,
                ErrorCode.MESSAGE_TOO_LARGE,
                f"body is {len(body)} bytes; the limit is {config.max_message_bytes}",
            )
        try:
            obj = json.loads(body.decode("utf-8"))
        except UnicodeDecodeError:
            return _error(400, ErrorCode.INVALID_UTF8, "body must be UTF-8 JSON")
        except (ValueError, RecursionError):
            return _error(400, ErrorCode.INVALID_JSON, 'body must be JSON such as {"text": "Hello."}')
        if not isinstance(obj, dict):
            return _error(
                400, ErrorCode.INVALID_MESSAGE, 'body must be a JSON object such as {"text": "Hello."}'
            )
        obj.setdefault("type", "synthesize")
        try:
            msg = message_from_object(obj, config.limits)
            if not isinstance(msg, Synthesize):
                raise ProtocolError(ErrorCode.UNKNOWN_TYPE, "POST /invocations takes one synthesize request")
            resolved = service.resolve(
                msg.text, SessionDefaults(), msg.voice, msg.speed, msg.format, msg.lang, msg.id
            )
        except ProtocolError as exc:
            metrics.count_error(str(exc.code))
            return _error(400, exc.code, exc.message)
        except Exception:
            log.exception("POST /invocations: request handling failed")
            return _error(500, ErrorCode.INTERNAL, "the server could not handle this request; try again")
        pieces_iter = service.audio_pieces(resolved)
        try:
            first = await anext(pieces_iter)  # plan + first piece before headers: errors become 4xx
        except ProtocolError as exc:
            await pieces_iter.aclose()
            metrics.count_error(str(exc.code))
            return _error(400, exc.code, exc.message)
        except BaseException:
            await pieces_iter.aclose()
            raise
        stream_sse = obj.get("stream") == "sse" or "text/event-stream" in request.headers.get("accept", "")
        body_iter = (
            _sse_body(resolved, first, pieces_iter)
            if stream_sse
            else _audio_body(resolved, first, pieces_iter)
        )
        media = "text/event-stream" if stream_sse else MEDIA_TYPES[resolved.format]
        metrics.active_streams += 1
        return _TimedStream(body_iter, media, metrics, config.send_timeout_s)

    def refusal(service: SpeechService | None) -> tuple[ErrorCode, str, int] | None:
        """Why a new session cannot start (error code, message, close code), or None."""
        if service is not None and service.draining:
            return ErrorCode.GOING_AWAY, "the server is shutting down; connect again shortly", 1001
        if service is None or not service.ready:
            return ErrorCode.NOT_READY, "model is loading; retry after /ping returns 200", 1013
        if metrics.active_sessions + metrics.active_streams >= config.max_sessions:
            return (
                ErrorCode.SERVER_BUSY,
                f"the server holds {config.max_sessions} sessions already; retry later",
                1013,
            )
        return None

    async def bidi(ws: WebSocket) -> None:
        # The token is checked before the upgrade and before anything else: a caller without it learns
        # nothing about the server's state (ready, draining, busy) and never gets a session.
        if not bearer_authorized(ws.headers.get("authorization"), config.auth_token):
            await ws.close(1008, "unauthorized")  # before accept(): the upgrade is refused with HTTP 403
            return
        service = state.get("service")
        await ws.accept()
        refused = refusal(service)
        if refused is not None or service is None:
            code, message, close_code = refused or (ErrorCode.NOT_READY, "not ready", 1013)
            await ws.send_text(encode_event(ErrorEvent(code, message)))
            await ws.close(close_code, code.value.replace("_", " "))
            return
        session_id = ws.headers.get("x-amzn-sagemaker-session-id") or uuid.uuid4().hex[:12]
        metrics.active_sessions += 1
        try:
            await BidiSession(ws, service, session_id).run()
        finally:
            metrics.active_sessions -= 1

    return Starlette(
        routes=[
            Route("/ping", ping, methods=["GET"]),
            Route("/invocations", invocations, methods=["POST"]),
            Route("/metrics", metrics_route, methods=["GET"]),
            WebSocketRoute(WS_PATH, bidi),
        ],
        lifespan=lifespan,
        middleware=[Middleware(BodyLimit, max_bytes=config.max_body_bytes)],
    )


async def _chain(
    first: NDArray[np.float32], rest: AsyncIterator[NDArray[np.float32]]
) -> AsyncIterator[NDArray[np.float32]]:
    yield first
    async for audio in rest:
        yield audio


async def _audio_body(
    request: ResolvedRequest, first: NDArray[np.float32], rest: AsyncGenerator[NDArray[np.float32]]
) -> AsyncGenerator[bytes]:
    encoder = make_encoder(request.format)
    async with aclosing(rest):  # a client that leaves (or times out) releases the queued model work
        async for audio in _chain(first, rest):
            data = encoder.encode(audio)
            if data:
                yield data
    tail = encoder.flush()
    if tail:
        yield tail


async def _sse_body(
    request: ResolvedRequest, first: NDArray[np.float32], rest: AsyncGenerator[NDArray[np.float32]]
) -> AsyncGenerator[bytes]:
    """Audio as SSE events with base64 data, for InvokeEndpointWithResponseStream callers."""

    def event(payload: dict[str, object]) -> bytes:
        return f"data: {json.dumps(payload)}\n\n".encode()

    yield event({"type": "audio_start", "format": request.format, "sample_rate": SAMPLE_RATE})
    seq = 0
    async with aclosing(_audio_body(request, first, rest)) as chunks:
        async for data in chunks:
            yield event({"type": "audio_chunk", "seq": seq, "data": base64.b64encode(data).decode("ascii")})
            seq += 1
    yield event({"type": "audio_end", "chunks": seq})


def transport_options(config: ServerConfig) -> dict[str, Any]:
    """uvicorn settings that follow from the server's limits; ``serve`` and the tests use the same ones.

    The WebSocket frame limit sits above ``max_message_bytes`` so an oversized message is answered
    ``message_too_large`` and the session goes on; only frames past this hard cap close it with 1009.
    """
    return {
        "ws_max_size": max(4 * config.max_message_bytes, 256 * 1024),
        "ws_ping_interval": config.ws_ping_interval_s,
        "ws_ping_timeout": config.ws_ping_timeout_s,
    }


def build_server(config: ServerConfig, engine: KokoroEngine | None = None, **uvicorn: Any) -> DrainingServer:
    """The server exactly as ``streamvoice serve`` runs it (``engine`` lets tests share a loaded model)."""
    return DrainingServer(
        create_app(config, engine),
        config.host,
        config.port,
        drain_timeout_s=config.drain_timeout_s,
        **{**transport_options(config), **uvicorn},
    )


class DrainingServer:
    """uvicorn with a graceful shutdown: on the first SIGTERM/SIGINT, /ping goes unhealthy and sessions
    finish their queued messages and close with 1001; the process exits once they are gone or after
    ``drain_timeout_s``. A second signal exits at once."""

    def __init__(
        self, app: Starlette, host: str, port: int, drain_timeout_s: float = 15.0, **kwargs: Any
    ) -> None:
        import uvicorn

        self.app = app
        self.drain_timeout_s = drain_timeout_s
        outer = self

        class _Server(uvicorn.Server):
            def handle_exit(self, sig: int, frame: Any) -> None:
                if outer._draining or outer._loop is None:
                    super().handle_exit(sig, frame)
                    return
                outer._draining = True
                outer._loop.call_soon_threadsafe(lambda: outer._loop.create_task(outer._drain()))  # type: ignore[union-attr]

            async def startup(self, sockets: Any = None) -> None:
                outer._loop = asyncio.get_running_loop()
                await super().startup(sockets)

        self._draining = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.server = _Server(uvicorn.Config(app, host=host, port=port, **kwargs))

    def request_shutdown(self) -> None:
        """What a signal does; callable from any thread."""
        self.server.handle_exit(15, None)

    async def _drain(self) -> None:
        service: SpeechService | None = getattr(self.app.state, "service", None)
        if service is not None:
            service.begin_drain()
            deadline = asyncio.get_running_loop().time() + self.drain_timeout_s
            while service.sessions and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.05)
        self.server.should_exit = True

    def run(self) -> None:
        self.server.run()
