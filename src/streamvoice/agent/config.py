"""The agent's settings, read in one place (``settings``: each ``STREAMVOICE_`` variable or a flag of
``streamvoice agent``), and whether it may serve where it was asked to. Checked by
``pytest tests/test_config.py tests/test_agent_commands.py``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from streamvoice.asgi import LOOPBACK_HOSTS
from streamvoice.protocol import DEFAULT_VOICE
from streamvoice.settings import check, from_environ, setting


@dataclass(frozen=True)
class AgentConfig:
    """The agent's settings: each ``STREAMVOICE_`` variable it reads, or a flag of ``streamvoice agent``."""

    speech_url: str = setting("http://127.0.0.1:8080", "the speech server the agent speaks through")
    speech_token: str | None = setting(None, "the speech server's key, if it has one")
    auth_token: str | None = setting(
        None,
        "the bootstrap key callers may send (or --token; tenants' keys in the store work too); without "
        "one, loopback only",
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
