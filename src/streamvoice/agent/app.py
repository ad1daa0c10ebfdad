"""The caller-facing agent service, on bedrock-agentcore's app class so the same entry point runs on
AgentCore Runtime: ``GET /ping``, ``POST /invocations`` answering Server-Sent Events, ``WS /ws`` with binary
audio frames, and the browser page at ``/``.

The speech endpoint comes from the agent's own configuration, never from the request: a caller must not
be able to point the agent's traffic somewhere else.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
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
from starlette.websockets import WebSocket, WebSocketDisconnect

from streamvoice import log_redaction
from streamvoice.agent.conversations import Conversations, conversation_id
from streamvoice.agent.llm import TextSource
from streamvoice.agent.pipeline import Event, SpeechPipeline, TurnOptions
from streamvoice.agent.turns import converse, interrupted_event
from streamvoice.asgi import LOOPBACK_HOSTS, BodyLimit, HostAllowList, TimedStreamingResponse, error_response
from streamvoice.client import SpeechClient
from streamvoice.protocol import (
    DEFAULT_VOICE,
    ErrorCode,
    Limits,
    ProtocolError,
    bearer_authorized,
    parse_json_object,
    played_ms,
    validate_speed,
    validate_voice,
)
from streamvoice.settings import check, from_environ, setting
from streamvoice.store import open_store
from streamvoice.store import owner as owner_of

log = logging.getLogger("streamvoice.agent")

SESSION_HEADER = "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"  # AgentCore's session: the conversation

WEB_DIR = Path(str(resources.files("streamvoice").joinpath("web/static")))


@dataclass(frozen=True)
class AgentConfig:
    """The agent's settings: each ``STREAMVOICE_`` variable it reads, or a flag of ``streamvoice agent``."""

    speech_url: str = setting("http://127.0.0.1:8080", "the speech server the agent speaks through")
    speech_token: str | None = setting(None, "the speech server's key, if it has one")
    auth_token: str | None = setting(
        None,
        "the key callers must send (or --token); without one, loopback only",
        env="STREAMVOICE_AGENT_TOKEN",
    )
    cors_origins: tuple[str, ...] = setting((), "browser origins allowed to call (an explicit list; no *)")
    # Host names the agent answers for; empty: any. ``streamvoice agent`` bound to loopback sets the
    # loopback names, so a rebound DNS name cannot reach it from a browser.
    allowed_hosts: tuple[str, ...] = setting(
        (), "Host names answered (empty: any; loopback names on loopback)"
    )
    max_prompt_chars: int = setting(2000, "characters of one prompt", 1, 1_000_000, from_env=False)
    default_voice: str = setting(DEFAULT_VOICE, "the voice a turn speaks in unless it asks", from_env=False)
    max_concurrent_turns: int = setting(
        8,
        "turns at once (each holds an LLM stream and a speech session)",
        1,
        10_000,
        env="STREAMVOICE_MAX_TURNS",
    )
    max_body_bytes: int = setting(64 * 1024, "bytes of one request body", 1, 1 << 30, from_env=False)
    send_timeout_s: float = setting(
        30.0, "a caller that reads nothing this long is disconnected", 0.1, 86_400, from_env=False
    )
    # Beyond loopback without ``auth_token`` the agent refuses to start unless this says something in front
    # of it authenticates callers (AgentCore Runtime's SigV4 or JWT authorizer, a gateway): ``exposure``.
    allow_unauthenticated: bool = setting(
        False,
        "serve beyond loopback without a key: a gateway in front authenticates callers",
        env="STREAMVOICE_AGENT_ALLOW_UNAUTHENTICATED",
    )
    store_url: str | None = setting(
        None, "where conversations are kept: redis://... (replicas share it), sqlite:///path, unset: embedded"
    )

    def __post_init__(self) -> None:
        check(self)

    @classmethod
    def from_env(cls, **overrides: Any) -> AgentConfig:
        """Each setting's variable, then explicit overrides (the command's flags) on top."""
        values = from_environ(cls, os.environ)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def exposure(host: str, config: AgentConfig) -> tuple[bool, str]:
    """Whether the agent may serve on ``host`` as configured, and the start-up line that says how it is
    protected. Without a key it spends its LLM and the speech server's key (``GET /voices``, ``mode: say``)
    for anyone who reaches it: beyond loopback that needs ``allow_unauthenticated``, as Wyoming's
    unauthenticated socket does (``tests/test_agent_commands.py``)."""
    if config.auth_token:
        return True, "agent: callers need the token (--token / STREAMVOICE_AGENT_TOKEN)"
    if host in LOOPBACK_HOSTS:
        return True, "agent: no token (--token / STREAMVOICE_AGENT_TOKEN): only this machine can reach it"
    if config.allow_unauthenticated:
        return True, (
            f"agent: no token on {host}: anyone who reaches it can use it; allowed because "
            "STREAMVOICE_AGENT_ALLOW_UNAUTHENTICATED says something in front of it authenticates callers"
        )
    return False, (
        f"the agent would listen on {host} without a token: anyone who reaches it could spend its language "
        "model and the speech server's key. Set --token (or STREAMVOICE_AGENT_TOKEN), bind --host 127.0.0.1, "
        "or, where a gateway in front authenticates callers (AgentCore Runtime does), "
        "--allow-unauthenticated (STREAMVOICE_AGENT_ALLOW_UNAUTHENTICATED=1)"
    )


def parse_turn_request(payload: Any, config: AgentConfig) -> tuple[str, TurnOptions]:
    """Validate a caller's payload. Unknown fields are ignored (AgentCore adds its own); none can redirect traffic.

    Voice and speed go through the same checks as the speech protocol's, so a mistake has one code everywhere.
    """
    if not isinstance(payload, dict):
        raise ProtocolError(ErrorCode.INVALID_MESSAGE, 'send a JSON object such as {"prompt": "Hello"}')
    prompt = payload.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ProtocolError(ErrorCode.MISSING_PROMPT, '"prompt" must be a non-empty string')
    if len(prompt) > config.max_prompt_chars:
        raise ProtocolError(
            ErrorCode.PROMPT_TOO_LONG, f'"prompt" is limited to {config.max_prompt_chars} characters'
        )
    mode = payload.get("mode", "bidi")
    if mode not in ("bidi", "batch", "say"):
        raise ProtocolError(
            ErrorCode.INVALID_MODE, '"mode" must be "bidi", "batch" or "say" (speak the prompt itself)'
        )
    voice = validate_voice(payload.get("voice", config.default_voice))
    speed = validate_speed(payload.get("speed", 1.0))
    return prompt.strip(), TurnOptions(mode=mode, voice=voice, speed=speed)


@dataclass(frozen=True)
class Caller:
    """Who sent a turn: the digest of its credential (conversations are per caller) and AgentCore's session."""

    owner: str
    session_id: str | None = None


@dataclass(frozen=True)
class ConversationRequest:
    """What a payload says of its conversation: its id (None: a new one), how much of the answer playing the
    caller's player played (None: the agent's clock), and whether it only interrupts."""

    id: str | None
    played_ms: float | None
    interrupt_only: bool


def parse_conversation(payload: Any, default_id: str | None = None) -> ConversationRequest:
    if not isinstance(payload, dict):
        raise ProtocolError(ErrorCode.INVALID_MESSAGE, 'send a JSON object such as {"prompt": "Hello"}')
    kind = payload.get("type")
    if kind not in (None, "prompt", "interrupt"):
        raise ProtocolError(
            ErrorCode.UNKNOWN_TYPE,
            '"type" must be "prompt" (the default) or "interrupt" (stop the answer playing)',
        )
    cid = conversation_id(payload.get("conversation")) or default_id
    if kind == "interrupt" and cid is None:
        raise ProtocolError(
            ErrorCode.INVALID_FIELD, '"interrupt" needs the "conversation" whose answer to stop'
        )
    return ConversationRequest(cid, played_ms(payload.get("played_ms")), kind == "interrupt")


def to_sse_payload(event: Event) -> Event:
    """SSE is text: audio travels base64-encoded inside JSON (the AgentCore entry point yields dicts)."""
    if event["type"] == "audio_chunk":
        return {**event, "data": base64.b64encode(event["data"]).decode("ascii")}
    return event


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

    def __init__(self, config: AgentConfig, middleware: list[Middleware]) -> None:
        super().__init__(middleware=middleware)
        self.config = config
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
            require_bearer(request, self.config.auth_token)
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
            caller = Caller(
                owner_of(request.headers.get("authorization")), request.headers.get(SESSION_HEADER)
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

    async def _sse(self, events: AsyncIterator[Event]) -> AsyncGenerator[bytes]:
        """The turn's events as SSE; closing this closes the turn (its LLM stream and speech session)."""
        try:
            async for event in events:
                yield self._convert_to_sse(event)  # type: ignore[no-untyped-call]
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()


def create_agent_app(source: TextSource, config: AgentConfig | None = None) -> AgentApp:
    cfg = config or AgentConfig.from_env()
    log_redaction.install()  # no key in any log line, whatever logger writes it
    middleware = [
        Middleware(HostAllowList, hosts=cfg.allowed_hosts),
        Middleware(BodyLimit, max_bytes=cfg.max_body_bytes, token=cfg.auth_token),
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
    app = AgentApp(cfg, middleware)

    async def connect() -> SpeechClient:
        return await SpeechClient.connect(cfg.speech_url, cfg.speech_token)

    pipeline = SpeechPipeline(source, connect)
    app.state.pipeline = pipeline
    conversations = Conversations(open_store(cfg.store_url))
    app.state.conversations = conversations

    @app.entrypoint
    async def invoke(payload: Any, caller: Caller | None = None) -> Any:
        """A turn (``{"prompt", "conversation"?, "played_ms"?}``: its events as SSE) or an interrupt
        (``{"type": "interrupt", "conversation", "played_ms"?}``: what was heard, as JSON). AgentCore's
        session id is the conversation when the payload names none."""
        caller = caller or Caller(owner_of(None))
        try:
            asked = parse_conversation(payload, caller.session_id)
            if asked.interrupt_only:
                found = conversations.find(caller.owner, asked.id)
                cut = await conversations.interrupt(found, asked.played_ms) if found is not None else None
                return JSONResponse({**interrupted_event(cut), "conversation": asked.id})
            prompt, options = parse_turn_request(payload, cfg)
            conversation = await conversations.open(caller.owner, asked.id)
        except ProtocolError as exc:
            return error_response(exc)

        async def events() -> AsyncIterator[Event]:
            turn = converse(conversations, conversation, pipeline, prompt, options, asked.played_ms)
            async for event in turn:  # the turn is counted by the route
                yield to_sse_payload(event)

        return events()

    @app.websocket
    async def ws_handler(websocket: WebSocket, context: Any) -> None:
        # Browsers send WebSockets cross-site without asking: only our own page and allowed origins.
        if not origin_allowed(websocket.headers.get("origin"), websocket.headers.get("host"), cfg):
            await websocket.close(1008, "origin not allowed")
            return
        token, subprotocol = websocket_token(websocket.headers)
        if not bearer_authorized(token, cfg.auth_token):
            await websocket.close(1008, "unauthorized")
            return
        await websocket.accept(subprotocol=subprotocol)
        await _talk(websocket, Caller(owner_of(token)))

    async def _talk(websocket: WebSocket, caller: Caller) -> None:
        """A caller's turns on one socket, one conversation unless a message names another. A prompt while
        an answer plays interrupts it (the old turn ends with ``interrupted``, what was heard), as does
        ``{"type": "interrupt"}``; the reader never waits for a turn, so an interrupt lands at once."""
        sending = asyncio.Lock()
        current: str | None = None  # the connection's conversation
        turn: asyncio.Task[None] | None = None

        async def send(event: Event) -> None:
            async with sending:
                if event["type"] == "audio_chunk":
                    await websocket.send_bytes(event["data"])
                else:
                    await websocket.send_text(json.dumps(event))

        async def run(events: AsyncIterator[Event], release: Callable[[], None]) -> None:
            try:
                async for event in events:
                    await send(event)
            finally:
                release()

        try:
            while (raw := await _receive_any(websocket)) is not None:
                try:
                    payload = _loads(raw)
                    asked = parse_conversation(payload, current)
                    running = turn is not None and not turn.done()
                    if asked.interrupt_only:
                        found = conversations.find(caller.owner, asked.id)
                        cut = (
                            await conversations.interrupt(found, asked.played_ms)
                            if found is not None
                            else None
                        )
                        if not running or cut is None:  # else the turn itself says what was heard
                            await send({**interrupted_event(cut), "conversation": asked.id})
                        continue
                    prompt, options = parse_turn_request(payload, cfg)
                    conversation = await conversations.open(caller.owner, asked.id)
                    current = conversation.id
                    if running and turn is not None:
                        await conversations.interrupt(conversation, asked.played_ms)
                        await turn  # it ends with ``interrupted`` and gives its room back
                    release = app.take_turn()
                except ProtocolError as exc:
                    await send({"type": "error", "code": str(exc.code), "message": exc.message})
                    continue
                events = converse(conversations, conversation, pipeline, prompt, options, asked.played_ms)
                turn = asyncio.create_task(run(events, release))
        except WebSocketDisconnect:
            pass
        finally:
            if turn is not None:
                turn.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await turn

    async def index(request: Request) -> Response:
        return FileResponse(WEB_DIR / "index.html")

    async def voices(request: Request) -> Response:
        """The speech server's voices for the page's picker (the page never talks to it directly)."""
        try:
            require_bearer(request, cfg.auth_token)
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

    app.add_route("/", index, methods=["GET"])
    app.add_route("/voices", voices, methods=["GET"])
    app.routes.append(Mount("/static", app=StaticFiles(directory=str(WEB_DIR)), name="static"))
    return app


def require_bearer(request: Request, token: str | None) -> None:
    """The one check of an HTTP caller's token, for every route that spends the agent's LLM or speech."""
    if not bearer_authorized(request.headers.get("authorization"), token):
        raise ProtocolError(ErrorCode.UNAUTHORIZED, "send Authorization: Bearer <token>")


# A browser cannot set headers on a WebSocket; it offers the token as a subprotocol pair instead:
# ``new WebSocket(url, ["streamvoice.bearer", token])``.
BEARER_SUBPROTOCOL = "streamvoice.bearer"


def websocket_token(headers: Any) -> tuple[str | None, str | None]:
    """(the Authorization header to check, the subprotocol to accept)."""
    offered = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",") if p.strip()]
    if BEARER_SUBPROTOCOL in offered:
        at = offered.index(BEARER_SUBPROTOCOL)
        if at + 1 < len(offered):
            return f"Bearer {offered[at + 1]}", BEARER_SUBPROTOCOL
    return headers.get("authorization"), None


def origin_allowed(origin: str | None, host: str | None, config: AgentConfig) -> bool:
    """No Origin: not a browser. Otherwise the page must come from this host or an allowed origin."""
    if origin is None:
        return True
    if origin in config.cors_origins:
        return True
    origin_host = origin.split("://", 1)[-1]
    return host is not None and origin_host.lower() == host.strip().lower()


async def _receive_any(websocket: WebSocket) -> str | bytes | None:
    message = await websocket.receive()
    if message["type"] == "websocket.disconnect":
        return None
    text = message.get("text")
    if isinstance(text, str):
        return text
    data = message.get("bytes")
    return data if isinstance(data, bytes) else b""


def _loads(raw: str | bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
