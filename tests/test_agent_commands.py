"""``streamvoice agent``: a key is a flag, start-up says whether callers need it, and the agent does not serve
beyond loopback without one unless told something in front authenticates callers (it ran open while the
speech server had a key: ``GET /voices`` and ``mode: say`` spent that key for anyone who reached it)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from streamvoice.agent.config import AgentConfig, exposure


def test_exposure_without_a_key_is_loopback_only_unless_allowed() -> None:
    assert exposure("127.0.0.1", AgentConfig())[0]
    assert exposure("0.0.0.0", AgentConfig(auth_token="k"))[0]
    allowed, why = exposure("0.0.0.0", AgentConfig())
    assert not allowed and "--token" in why and "--allow-unauthenticated" in why
    allowed, line = exposure("0.0.0.0", AgentConfig(allow_unauthenticated=True))
    assert allowed and "anyone who reaches it" in line


def test_the_env_and_the_flags_set_the_key_and_the_permission(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMVOICE_AGENT_TOKEN", "from-env")
    monkeypatch.setenv("STREAMVOICE_AGENT_ALLOW_UNAUTHENTICATED", "1")
    config = AgentConfig.from_env()
    assert config.auth_token == "from-env" and config.allow_unauthenticated
    assert AgentConfig.from_env(auth_token="flag").auth_token == "flag"  # the flag wins


def _agent(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMVOICE_AGENT")}
    return subprocess.run(
        [sys.executable, "-m", "streamvoice.cli", "agent", *args],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


def test_the_command_refuses_to_serve_beyond_loopback_without_a_key() -> None:
    refused = _agent("--host", "0.0.0.0", "--llm", "openai")
    assert refused.returncode == 2
    assert "without a token" in refused.stderr and "--token" in refused.stderr
    helped = _agent("--help")
    assert "--token" in helped.stdout and "--allow-unauthenticated" in helped.stdout
