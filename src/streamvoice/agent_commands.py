"""``streamvoice agent`` and ``streamvoice demo`` (registered only when the agent extra is installed)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def _add_llm_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--llm",
        choices=["local", "openai", "bedrock"],
        default=os.environ.get("STREAMVOICE_LLM", "local"),
        help="local: llama.cpp + Gemma 3 270M in-process (default); openai: any OpenAI-compatible server; bedrock: Amazon Bedrock via Strands",
    )
    p.add_argument("--llm-threads", type=int, default=int(os.environ.get("STREAMVOICE_LLM_THREADS", "2")))
    p.add_argument(
        "--openai-base-url", default=os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    )
    p.add_argument("--openai-model", default=os.environ.get("OPENAI_MODEL", "llama3.2"))
    p.add_argument("--openai-api-key", default=os.environ.get("OPENAI_API_KEY"))
    p.add_argument("--bedrock-model-id", default=os.environ.get("BEDROCK_MODEL_ID"))
    p.add_argument("--region", default=os.environ.get("AWS_REGION"))


def build_source(args: argparse.Namespace) -> Any:
    from streamvoice.agent.llm import BedrockSource, OpenAICompatibleSource
    from streamvoice.agent.local_llm import LlamaCppSource

    if args.llm == "openai":
        return OpenAICompatibleSource(
            base_url=args.openai_base_url, model=args.openai_model, api_key=args.openai_api_key
        )
    if args.llm == "bedrock":
        if not args.bedrock_model_id:
            raise SystemExit("error: --llm bedrock needs --bedrock-model-id (or BEDROCK_MODEL_ID)")
        return BedrockSource(model_id=args.bedrock_model_id, region=args.region)
    return LlamaCppSource(threads=args.llm_threads)


def cmd_agent(args: argparse.Namespace) -> int:
    from dataclasses import replace

    import uvicorn

    from streamvoice.agent.app import create_agent_app
    from streamvoice.agent.config import AgentConfig, exposure
    from streamvoice.agent.local_llm import LlamaCppSource
    from streamvoice.asgi import LOOPBACK_HOSTS
    from streamvoice.request_head import HEAD_TIMEOUT_S, MAX_CONNECTIONS, raise_file_limit, with_head_deadline

    config = AgentConfig.from_env(
        speech_url=args.speech_url,
        auth_token=args.token,
        allow_unauthenticated=True if args.allow_unauthenticated else None,
    )
    allowed, line = exposure(args.host, config)
    if not allowed:
        print(f"error: {line}", file=sys.stderr)
        return 2
    print(line, file=sys.stderr)  # whatever the log level: whether callers need a key
    if not config.allowed_hosts and args.host in LOOPBACK_HOSTS:
        config = replace(config, allowed_hosts=LOOPBACK_HOSTS)  # no DNS-rebound name reaches it
    source = build_source(args)
    if isinstance(source, LlamaCppSource):
        source.start()  # load before /ping says healthy
    app = create_agent_app(source, config)
    # No connection held by a request head that never ends; connections past the cap refused 503.
    http = with_head_deadline(HEAD_TIMEOUT_S, raise_file_limit(MAX_CONNECTIONS))
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, http=http)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from streamvoice.demo import main

    llm_args = ["--llm", args.llm, "--llm-threads", str(args.llm_threads)]
    return main(
        args.prompt,
        args.runs,
        args.endpoint_url,
        args.json,
        os.environ.get("STREAMVOICE_AGENT_TOKEN"),
        llm_args,
        args.out,
        args.play,
    )


def add_agent_commands(sub: Any) -> None:
    from streamvoice.demo import DEFAULT_PROMPT

    p = sub.add_parser(
        "agent", help="run the agent service (AgentCore contract: /ping, /invocations SSE, /ws, web page)"
    )
    p.add_argument("--host", default=os.environ.get("STREAMVOICE_AGENT_HOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(os.environ.get("STREAMVOICE_AGENT_PORT", "8080")))
    p.add_argument(
        "--speech-url", default=None, help="default $STREAMVOICE_SPEECH_URL, else http://127.0.0.1:8080"
    )
    p.add_argument(
        "--token",
        default=None,
        help="the key callers must send (Authorization: Bearer KEY); default $STREAMVOICE_AGENT_TOKEN. Without "
        "one the agent serves only on loopback, unless --allow-unauthenticated",
    )
    p.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        help="serve beyond loopback without a token: only where a gateway in front authenticates callers "
        "(AgentCore Runtime does); env STREAMVOICE_AGENT_ALLOW_UNAUTHENTICATED=1",
    )
    from streamvoice.settings import LOG_LEVELS

    p.add_argument("--log-level", default="warning", choices=list(LOG_LEVELS))
    _add_llm_args(p)
    p.set_defaults(func=cmd_agent)

    d = sub.add_parser("demo", help="bidi vs batch time to first audio, side by side")
    d.add_argument("--prompt", default=DEFAULT_PROMPT)
    d.add_argument("--runs", type=int, default=1, help="runs per mode (1: a quick comparison; 3: careful)")
    d.add_argument("--out", default="demo-out", help="where bidi.wav, batch.wav and timeline.png go")
    d.add_argument("--play", action="store_true", help="play the two WAVs (where an audio device exists)")
    d.add_argument("--endpoint-url", help="measure a running agent instead of starting one")
    d.add_argument("--json", action="store_true")
    _add_llm_args(d)
    d.set_defaults(func=cmd_demo)


AGENT_TABLE_START = (
    "<!-- agent settings: rendered from agent/config.py by python -m streamvoice.agent_commands -->"
)
AGENT_TABLE_END = "<!-- end of agent settings -->"


def with_agent_settings(page: str) -> str:
    """``docs/configuration.md`` with the agent's settings table (``AgentConfig``) rendered anew."""
    from streamvoice.agent.config import AgentConfig
    from streamvoice.settings import markdown_table, with_table

    return with_table(page, AGENT_TABLE_START, AGENT_TABLE_END, markdown_table(AgentConfig))


if __name__ == "__main__":
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
    path.write_text(with_agent_settings(path.read_text()))
