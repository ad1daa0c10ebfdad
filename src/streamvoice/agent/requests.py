"""What a caller sends the agent, checked before anything is spent: the turn's prompt and options, its
conversation, its key (a header, or a browser's WebSocket subprotocol) and its page's origin. Nothing a caller
sends can point the agent's traffic elsewhere. Checked by ``pytest tests/test_agent.py``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from streamvoice.agent.config import AgentConfig
from streamvoice.agent.conversations import conversation_id
from streamvoice.agent.pipeline import TurnOptions
from streamvoice.protocol import (
    ErrorCode,
    ProtocolError,
    bearer_key,
    played_ms,
    validate_speed,
    validate_voice,
)
from streamvoice.store import owner as owner_of
from streamvoice.store.keys import Keyring


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


SESSION_HEADER = "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"  # AgentCore's session: the conversation


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


def parse_conversation(
    payload: Any, default_id: str | None = None, default_from: str = "the session header"
) -> ConversationRequest:
    """``default_id``: the conversation a transport names when the payload does not (AgentCore's session
    header), checked as a payload's id is: a 201-character header was a 500, ``a\\x01b`` an id."""
    if not isinstance(payload, dict):
        raise ProtocolError(ErrorCode.INVALID_MESSAGE, 'send a JSON object such as {"prompt": "Hello"}')
    kind = payload.get("type")
    if kind not in (None, "prompt", "interrupt"):
        raise ProtocolError(
            ErrorCode.UNKNOWN_TYPE,
            '"type" must be "prompt" (the default) or "interrupt" (stop the answer playing)',
        )
    cid = conversation_id(payload.get("conversation")) or conversation_id(default_id, default_from)
    if kind == "interrupt" and cid is None:
        raise ProtocolError(
            ErrorCode.INVALID_FIELD, '"interrupt" needs the "conversation" whose answer to stop'
        )
    return ConversationRequest(cid, played_ms(payload.get("played_ms")), kind == "interrupt")


async def require_bearer(request: Request, keyring: Keyring) -> Caller:
    """The one check of an HTTP caller's key, for every route that spends the agent's LLM or speech: the
    caller it names (its tenant's records), or ``unauthorized``."""
    authorization, session = request.headers.get("authorization"), request.headers.get(SESSION_HEADER)
    return await bearer_caller(authorization, keyring, session)


async def bearer_caller(authorization: str | None, keyring: Keyring, session_id: str | None = None) -> Caller:
    """The caller an ``Authorization: Bearer`` value names: a key record's tenant or the bootstrap key's
    (the same records as the speech server's), or, on an agent without keys, one per presented value."""
    await keyring.fresh()
    tenant = keyring.find(bearer_key(authorization))
    if tenant is not None:
        return Caller(tenant.owner, session_id)
    if keyring.required:
        raise ProtocolError(ErrorCode.UNAUTHORIZED, "send Authorization: Bearer <key>")
    return Caller(owner_of(authorization), session_id)


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
