"""The caller-facing agent service, on bedrock-agentcore's app class so the same entry point runs on
AgentCore Runtime: ``GET /ping``, ``POST /invocations`` answering Server-Sent Events, ``WS /ws`` with binary
audio frames, and the browser page at ``/``.

The speech endpoint comes from the agent's own configuration, never from the request: a caller must not
be able to point the agent's traffic somewhere else.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from importlib import resources
from pathlib import Path
from typing import Any

import httpx
from bedrock_agentcore import BedrockAgentCoreApp
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket

from streamvoice import log_redaction
from streamvoice.agent.config import AgentConfig
from streamvoice.agent.conversations import Conversations
from streamvoice.agent.events import Event
from streamvoice.agent.llm import TextSource
from streamvoice.agent.pipeline import SpeechPipeline
from streamvoice.agent.requests import (
    SESSION_HEADER,
    Caller,
    parse_conversation,
    parse_turn_request,
    require_bearer,
)
from streamvoice.agent.socket import CallerSocket, accept_caller
from streamvoice.agent.turns import converse, interrupted_event
from streamvoice.asgi import BodyLimit, HostAllowList, TimedStreamingResponse, error_response
from streamvoice.client import SpeechClient
from streamvoice.protocol import (
    ErrorCode,
    Limits,
    ProtocolError,
    parse_json_object,
)
from streamvoice.store import open_store
from streamvoice.store import owner as owner_of
from streamvoice.store.keys import Keyring

log = logging.getLogger("streamvoice.agent")


WEB_DIR = Path(str(resources.files("streamvoice").joinpath("web/static")))


def to_sse_payload(event: Event) -> dict[str, Any]:
    """SSE is text: audio travels base64-encoded inside JSON (the AgentCore entry point yields dicts)."""
    if event["type"] == "audio_chunk":
        return {**event, "data": base64.b64encode(event["data"]).decode("ascii")}
    return dict(event)


def check_framework(app: Any) -> None:
    """``AgentApp`` replaces two private methods of ``bedrock-agentcore``'s app (its turn bridge spins on a
    caller that reads nothing). A release that renames them would leave the replacement dead and the old
    bridge serving, silently: refuse to start instead, naming the version to pin
    (``tests/test_agent.py::test_an_unknown_agentcore_release_fails_loudly``)."""
    from importlib.metadata import version

    route = next((r for r in app.routes if getattr(r, "path", None) == "/invocations"), None)
    ours = route is not None and getattr(route, "endpoint", None) == getattr(app, "_handle_invocation", None)
    if not ours or not callable(getattr(BedrockAgentCoreApp, "_convert_to_sse", None)):
        raise RuntimeError(
            f"bedrock-agentcore {version('bedrock-agentcore')} no longer routes /invocations through "
            "_handle_invocation (or has no _convert_to_sse): the agent's safe turn handling would not run. "
            "Install the version in requirements.lock (pip install -c requirements.lock ...)."
        )


class AgentApp(BedrockAgentCoreApp):
    """AgentCore's app with safe request parsing: callers never see raw exception text."""

    def __init__(self, config: AgentConfig, middleware: list[Middleware], keyring: Keyring) -> None:
        super().__init__(middleware=middleware)
        self.config = config
        self.keyring = keyring
        self.turns = 0  # turns in progress, over both routes
        check_framework(self)

    def check_room(self) -> None:
        """Raise ``server_busy`` when the agent already answers as many callers as it may."""
        if self.turns >= self.config.max_concurrent_turns:
            raise ProtocolError(
                ErrorCode.SERVER_BUSY,
                f"the agent is answering {self.turns} callers already; retry in a moment",
            )

    def take_turn(self) -> Callable[[], None]:
        """Room for one turn, counted now (check and count with no ``await`` between: the cap holds for
        callers arriving together; 8 of 8 ran with a limit of 2 when turns were counted at their first
        event), and the function that gives it back, safe to call more than once."""
        self.check_room()
        self.turns += 1
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                self.turns -= 1

        return release

    async def _handle_invocation(self, request: Request) -> Response:
        """The checks, the turn, and the answer's stream, all here rather than in the framework's bridge:
        its sync generator spins on a full queue when the caller reads nothing and never closes the turn's
        generator (two such callers made every later turn ``server_busy`` for good). Here the turn's events
        stream from this loop with a send timeout, and the turn ends when the response does, however."""
        try:
            caller = await require_bearer(request, self.keyring)
            # JSON only: a cross-site page can POST text/plain without asking (no CORS preflight) and so
            # spend this agent's LLM credit; application/json needs a preflight only allowed origins pass.
            media = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if media != "application/json":
                raise ProtocolError(
                    ErrorCode.UNSUPPORTED_MEDIA_TYPE, "send the request as Content-Type: application/json"
                )
            release = self.take_turn()
        except ProtocolError as exc:
            return error_response(exc)
        try:
            payload = parse_json_object(
                await request.body(), Limits(max_message_bytes=self.config.max_body_bytes)
            )
            result = await self.handlers["main"](payload, caller)
        except ProtocolError as exc:
            release()
            return error_response(exc)
        except BaseException:
            release()
            raise
        if isinstance(result, Response):
            release()
            return result
        return TimedStreamingResponse(
            self._sse(result),
            "text/event-stream",
            self.config.send_timeout_s,
            on_close=release,
        )

    async def _sse(self, events: AsyncIterator[dict[str, Any]]) -> AsyncGenerator[bytes]:
        """The turn's events as SSE; closing this closes the turn (its LLM stream and speech session)."""
        try:
            async for event in events:
                yield self._convert_to_sse(event)  # type: ignore[no-untyped-call]
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()


def create_agent_app(source: TextSource, config: AgentConfig | None = None) -> AgentApp:
    """The agent over ``source`` (a language model's text), speaking through the configured speech server."""
    cfg = config or AgentConfig.from_env()
    log_redaction.install()  # no key in any log line, whatever logger writes it
    store = open_store(cfg.store_url)
    keyring = Keyring(store, cfg.auth_token)  # its callers' keys: the same records as the speech server's
    app = AgentApp(cfg, _middleware(cfg, keyring), keyring)

    async def connect() -> SpeechClient:
        return await SpeechClient.connect(cfg.speech_url, cfg.speech_token)

    pipeline = SpeechPipeline(source, connect)
    conversations = Conversations(store)
    app.state.pipeline, app.state.conversations = pipeline, conversations

    @app.entrypoint
    async def invoke(payload: Any, caller: Caller | None = None) -> Any:
        return await invocation(payload, caller or Caller(owner_of(None)), conversations, pipeline, cfg)

    @app.websocket
    async def ws_handler(websocket: WebSocket, context: Any) -> None:
        caller = await accept_caller(websocket, cfg, keyring)
        if caller is not None:
            await CallerSocket(websocket, caller, conversations, pipeline, cfg, app.take_turn).run()

    async def index(request: Request) -> Response:
        return FileResponse(WEB_DIR / "index.html")

    async def voices(request: Request) -> Response:
        return await speech_voices(request, cfg, keyring)

    app.add_route("/", index, methods=["GET"])
    app.add_route("/voices", voices, methods=["GET"])
    app.routes.append(Mount("/static", app=StaticFiles(directory=str(WEB_DIR)), name="static"))
    return app


def _middleware(cfg: AgentConfig, keyring: Keyring) -> list[Middleware]:
    middleware = [
        Middleware(HostAllowList, hosts=cfg.allowed_hosts),
        Middleware(BodyLimit, max_bytes=cfg.max_body_bytes, keys=keyring),
    ]
    if cfg.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(cfg.cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["content-type", "authorization"],
            )
        )
    return middleware


async def invocation(
    payload: Any, caller: Caller, conversations: Conversations, pipeline: SpeechPipeline, cfg: AgentConfig
) -> Any:
    """A turn (``{"prompt", "conversation"?, "played_ms"?}``: its events as SSE) or an interrupt
    (``{"type": "interrupt", "conversation", "played_ms"?}``: what was heard, as JSON). AgentCore's
    session id is the conversation when the payload names none."""
    try:
        asked = parse_conversation(payload, caller.session_id, SESSION_HEADER)
        if asked.interrupt_only:
            cut = await conversations.interrupt_named(caller.owner, asked.id, asked.played_ms)
            return JSONResponse(interrupted_event(cut, asked.id))
        prompt, options = parse_turn_request(payload, cfg)
        conversation = await conversations.open(caller.owner, asked.id)
    except ProtocolError as exc:
        return error_response(exc)

    async def events() -> AsyncIterator[dict[str, Any]]:
        turn = converse(conversations, conversation, pipeline, prompt, options, asked.played_ms)
        async for event in turn:  # the turn is counted by the route
            yield to_sse_payload(event)

    return events()


async def speech_voices(request: Request, cfg: AgentConfig, keyring: Keyring) -> Response:
    """The speech server's voices for the page's picker (the page never talks to it directly)."""
    try:
        await require_bearer(request, keyring)
    except ProtocolError as exc:
        return error_response(exc)
    headers = {"Authorization": f"Bearer {cfg.speech_token}"} if cfg.speech_token else {}
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            answer = await http.get(cfg.speech_url.rstrip("/") + "/v1/audio/voices", headers=headers)
        answer.raise_for_status()
        listed = answer.json()["voices"]
    except (httpx.HTTPError, KeyError, ValueError):
        return error_response(
            ProtocolError(ErrorCode.SPEECH_UNAVAILABLE, "the speech server's voices could not be listed")
        )
    return JSONResponse({"voices": listed})
