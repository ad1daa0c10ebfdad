"""Settings: environment and flags into one typed config, and what the engine receives from it."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from streamvoice.server.core.config import ConfigError, ServerConfig


def test_environment_then_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMVOICE_PORT", "9001")
    monkeypatch.setenv("STREAMVOICE_SEND_TIMEOUT_S", "2.5")
    monkeypatch.setenv("STREAMVOICE_STREAM_WINDOWS", "0")
    monkeypatch.setenv("STREAMVOICE_ORT_THREADS", "1")
    monkeypatch.setenv("STREAMVOICE_ORT_SPIN", "yes")
    monkeypatch.setenv("STREAMVOICE_EMF", "true")
    monkeypatch.setenv("KOKORO_MODEL_DIR", "/models")
    config = ServerConfig.from_env(port=9100, host=None)
    assert config.port == 9100  # a flag wins over the environment
    assert config.host == "127.0.0.1"  # a flag left unset keeps the default
    assert config.send_timeout_s == 2.5 and config.emf and config.model_dir == "/models"
    options = config.engine_options  # the engine gets its settings from here, never from the environment
    assert (options.intra_op_threads, options.spin, options.stream_windows) == (1, True, False)


def test_model_dir_setting_wins_over_kokoro_model_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KOKORO_MODEL_DIR", "/models")
    monkeypatch.setenv("STREAMVOICE_MODEL_DIR", "/mine")
    assert ServerConfig.from_env().model_dir == "/mine"


def test_a_malformed_number_is_an_error_that_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMVOICE_MAX_SESSIONS", "lots")
    with pytest.raises(ValueError, match="STREAMVOICE_MAX_SESSIONS"):
        ServerConfig.from_env()


def test_limits_and_warm_voices_follow_the_fields() -> None:
    config = ServerConfig(max_message_bytes=1000, max_text_chars=50, warm_voices=" af_heart, am_adam ,")
    assert (config.limits.max_message_bytes, config.limits.max_text_chars) == (1000, 50)
    assert config.warm_voice_list == ("af_heart", "am_adam")


# --- 29. Wyoming beyond loopback with a token set needs an explicit opt-in ------------------------------------


def test_remote_wyoming_with_a_token_needs_an_opt_in() -> None:
    with pytest.raises(ConfigError, match="WYOMING_ALLOW_UNAUTHENTICATED"):
        ServerConfig(wyoming_uri="tcp://0.0.0.0:10200", auth_token="secret")
    ServerConfig(wyoming_uri="tcp://0.0.0.0:10200", auth_token="secret", wyoming_allow_unauthenticated=True)
    ServerConfig(wyoming_uri="tcp://127.0.0.1:10200", auth_token="secret")
    ServerConfig(wyoming_uri="tcp://0.0.0.0:10200")  # no token: nothing is promised, as documented


def test_the_start_says_whether_a_token_is_needed_and_names_settings_missing_their_prefix() -> None:
    from streamvoice.server.core.config_docs import startup_notes

    open_notes = startup_notes(ServerConfig(), {"AUTH_TOKEN": "s3cret", "PORT": "8080"})
    assert open_notes[0] == (False, open_notes[0][1]) and "authentication off" in open_notes[0][1]
    warnings = [line for warning, line in open_notes if warning]
    assert warnings == ["AUTH_TOKEN is set but ignored: this server reads STREAMVOICE_AUTH_TOKEN"]  # not PORT
    closed = startup_notes(ServerConfig(auth_token="s3cret"), {"STREAMVOICE_AUTH_TOKEN": "s3cret"})
    assert closed == [(False, closed[0][1])] and "authentication on" in closed[0][1]


# --- settings documented from the code --------------------------------------------------------------------

CONFIGURATION_MD = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def test_docs_configuration_is_rendered_from_the_fields() -> None:
    """``docs/configuration.md`` carries the table ``settings_markdown`` renders: a setting added, renamed or
    re-ranged in the code without the docs fails here (regenerate: ``python -m streamvoice.server.core.config_docs``)."""
    from streamvoice.server.core.config_docs import settings_markdown

    assert settings_markdown() in CONFIGURATION_MD.read_text(), (
        "run: python -m streamvoice.server.core.config_docs"
    )
    assert all(f.metadata["meaning"] for f in fields(ServerConfig))


def test_the_agents_settings_are_rendered_from_its_fields_and_the_server_knows_their_names() -> None:
    """The agent declares its settings as the server does (``streamvoice.settings``): its table in
    ``docs/configuration.md`` is rendered from ``AgentConfig`` (regenerate: ``python -m
    streamvoice.agent_commands``), and a server started beside it never refuses one of its names."""
    from streamvoice.agent.config import AgentConfig
    from streamvoice.server.core.config import KNOWN_NAMES
    from streamvoice.settings import env_names, markdown_table

    assert markdown_table(AgentConfig) in CONFIGURATION_MD.read_text(), (
        "run: python -m streamvoice.agent_commands"
    )
    assert env_names(AgentConfig) <= KNOWN_NAMES
    assert "STREAMVOICE_AGENT_TOKEN" in env_names(AgentConfig) and "STREAMVOICE_MAX_TURNS" in env_names(
        AgentConfig
    )


def test_the_agent_reads_its_settings_typed_and_refuses_them_out_of_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from streamvoice.agent.config import AgentConfig

    monkeypatch.setenv("STREAMVOICE_CORS_ORIGINS", "https://a.example, https://b.example")
    monkeypatch.setenv("STREAMVOICE_MAX_TURNS", "3")
    monkeypatch.setenv("STREAMVOICE_SPEECH_TOKEN", "")  # empty text: unset, as before
    config = AgentConfig.from_env()
    assert config.cors_origins == ("https://a.example", "https://b.example")
    assert config.max_concurrent_turns == 3 and config.speech_token is None
    monkeypatch.setenv("STREAMVOICE_MAX_TURNS", "0")
    with pytest.raises(ConfigError, match="STREAMVOICE_MAX_TURNS=0 is out of range: it takes 1-10000"):
        AgentConfig.from_env()
    monkeypatch.setenv("STREAMVOICE_MAX_TURNS", "many")
    with pytest.raises(ConfigError, match="STREAMVOICE_MAX_TURNS='many' is not a valid int"):
        AgentConfig.from_env()


def test_a_value_out_of_range_is_refused_naming_the_setting_and_its_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value, says in (
        ("STREAMVOICE_PORT", "70000", "STREAMVOICE_PORT=70000 is out of range: it takes 1-65535"),
        (
            "STREAMVOICE_PAUSE_SENTENCE_MS",
            "-5",
            "STREAMVOICE_PAUSE_SENTENCE_MS=-5 is out of range: it takes 0-3000",
        ),
        (
            "STREAMVOICE_ADMISSION",
            "lifo",
            "STREAMVOICE_ADMISSION='lifo' is out of range: it takes off / refuse / queue",
        ),
        ("STREAMVOICE_MAX_SESSIONS", "0", "STREAMVOICE_MAX_SESSIONS=0 is out of range: it takes 1-1000000"),
    ):
        with monkeypatch.context() as env:
            env.setenv(name, value)
            with pytest.raises(ConfigError) as refused:
                ServerConfig.from_env()
            assert str(refused.value).startswith(says), str(refused.value)


def test_a_removed_setting_is_refused_with_what_to_do_instead(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMVOICE_SCHEDULER", "deadline")
    with pytest.raises(ConfigError, match=r"STREAMVOICE_SCHEDULER is no longer a setting: .* unset it"):
        ServerConfig.from_env()


def test_an_empty_variable_is_unset_for_free_text_and_refused_for_a_word_or_a_number(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STREAMVOICE_AUTH_TOKEN", "")
    assert ServerConfig.from_env().auth_token is None
    monkeypatch.setenv("STREAMVOICE_ADMISSION", "")
    with pytest.raises(
        ConfigError, match="STREAMVOICE_ADMISSION='' is out of range: it takes off / refuse / queue"
    ):
        ServerConfig.from_env()
    monkeypatch.delenv("STREAMVOICE_ADMISSION")
    monkeypatch.setenv("STREAMVOICE_PORT", "")
    with pytest.raises(ConfigError, match="STREAMVOICE_PORT='' is not a valid int"):
        ServerConfig.from_env()


def test_an_unknown_streamvoice_name_is_refused_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMVOICE_MAX_SESSION", "8")  # a typo of MAX_SESSIONS: it used to be ignored
    with pytest.raises(ConfigError, match="STREAMVOICE_MAX_SESSION is not a setting"):
        ServerConfig.from_env()
    monkeypatch.delenv("STREAMVOICE_MAX_SESSION")
    monkeypatch.setenv("STREAMVOICE_SPEECH_URL", "http://speech:8080")  # the agent's, set beside it: fine
    assert ServerConfig.from_env().port == 8080


def test_every_streamvoice_name_the_code_reads_is_known() -> None:
    """The agent's, the tools' and the benchmarks' names are in ``OTHER_NAMES``: the start never refuses one
    (a removed name is read only to be refused with what to do instead)."""
    from streamvoice.server.core.config import KNOWN_NAMES, REMOVED_NAMES

    root = Path(__file__).resolve().parents[1]
    used = set()
    for folder in ("src", "deploy", "docker"):
        for path in (root / folder).rglob("*"):
            readable = path.suffix in (".py", ".yaml", ".tpl", "") or folder == "docker"
            if path.is_file() and readable and "egg-info" not in str(path) and "__pycache__" not in str(path):
                used |= set(re.findall(r"STREAMVOICE_[A-Z0-9_]*[A-Z0-9]", path.read_text(errors="ignore")))
    assert used - KNOWN_NAMES - set(REMOVED_NAMES) == set()


def test_serve_help_shows_every_setting() -> None:
    from streamvoice.cli import build_parser

    parser = build_parser()
    serve = next(a for a in parser._subparsers._group_actions if a.dest == "command").choices["serve"]  # type: ignore[union-attr]
    shown = serve.format_help()
    assert all(f"STREAMVOICE_{f.name.upper()} " in shown for f in fields(ServerConfig))
