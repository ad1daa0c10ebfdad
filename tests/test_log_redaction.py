"""``log_redaction``: no caller's key in any log line, whatever logger writes it. uvicorn wrote WebSocket
request lines (``uvicorn.error``) with ``?api_key=KEY`` in clear, wrong keys too: the filter sat on
``uvicorn.access`` only. Checked here on a real ``streamvoice serve`` process's every line, every key form."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from streamvoice.asgi import free_port
from streamvoice.log_redaction import install, redact

RIGHT = "right-Key-7f3a9c"
WRONG = "wrong-Key-0b1d2e"


def test_key_like_parameters_are_redacted_in_any_case_and_encoding_and_the_rest_kept() -> None:
    path = "/tts/websocket?api_key=sk-secret&cartesia_version=2025-04-16&access_token=t0k"
    assert redact(path) == "/tts/websocket?api_key=***&cartesia_version=2025-04-16&access_token=***"
    assert redact("/v1/x/stream-input?XI_API_KEY=abc") == "/v1/x/stream-input?XI_API_KEY=***"
    assert redact("/tts/websocket?API%5FKEY=abc&x=1") == "/tts/websocket?API%5FKEY=***&x=1"  # decoded name
    assert (
        redact('"WebSocket /tts/websocket?a=1&token=abc" 403')
        == '"WebSocket /tts/websocket?a=1&token=***" 403'
    )
    assert redact("/v1/speak?model=aura-2-thalia-en") == "/v1/speak?model=aura-2-thalia-en"
    assert (
        redact("authorization: Bearer abc, xi-api-key: 'def'")
        == "authorization: Bearer ***, xi-api-key: '***'"
    )
    assert redact("< sec-websocket-protocol: token, abc") == "< sec-websocket-protocol: token, ***"
    assert (
        redact("""< TEXT '{"text": " ", "xi_api_key": "abc"}'""")
        == """< TEXT '{"text": " ", "xi_api_key": "***"}'"""
    )
    assert redact("/ping") == "/ping"
    assert redact("Authorization: Basic abc") == "Authorization: Basic ***"  # any scheme: not "*** abc"
    assert redact('{"xi\\u005fapi_key": "abc"}') == '{"xi\\u005fapi_key": "***"}'  # an escaped name


def test_a_librarys_debug_records_keep_no_argument_but_numbers() -> None:
    """websockets cuts a long frame in the middle (``'{"text": " ", ...key": "KEY"}'``): no pattern finds a
    key whose field name was cut away, so a library's detail never formats its arguments at all."""
    install()
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    frame = """'{"text": " ", "voice_settings": {"stability": 0...key": "sk-secret"}'"""
    for name, level in (("websockets.server", logging.DEBUG), ("uvicorn.error", 5)):
        logger = logging.getLogger(name)
        logger.setLevel(1)
        handler = Keep()
        logger.addHandler(handler)
        try:
            logger.log(level, "< TEXT %s [%d bytes]", frame, 187)
        finally:
            logger.removeHandler(handler)
            logger.setLevel(logging.NOTSET)
    assert [r.getMessage() for r in records] == ["< TEXT [withheld] [187 bytes]"] * 2


def test_every_logger_is_covered_not_only_the_access_log() -> None:
    install()
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    for name in ("uvicorn.error", "uvicorn.access", "websockets.server", "anything.else"):
        logger = logging.getLogger(name)
        handler = Keep()
        logger.addHandler(handler)
        try:
            logger.warning('%s - "WebSocket %s" 403', "127.0.0.1:5", "/tts/websocket?api_key=sk-secret")
            logger.warning("GET /x?xi_api_key=sk-secret")
        finally:
            logger.removeHandler(handler)
    assert len(records) == 8 and not any("sk-secret" in r.getMessage() for r in records)


def _every_key_form(base: str, ws_base: str) -> None:
    """Each way a caller can carry a key, with the right key and a wrong one."""

    async def sockets() -> None:
        for key in (RIGHT, WRONG):
            for query in (f"api_key={key}", f"access_token={key}", f"API%5FKEY={key}", f"xi_api_key={key}"):
                for path in ("/tts/websocket", "/v1/text-to-speech/af_heart/stream-input", "/v1/speak"):
                    try:
                        async with websockets.connect(f"{ws_base}{path}?{query}&cartesia_version=2025-04-16"):
                            pass
                    except InvalidStatus:
                        pass
            try:  # Deepgram's browser form: the subprotocols ["token", KEY]
                async with websockets.connect(f"{ws_base}/v1/speak", subprotocols=["token", key]):  # type: ignore[list-item]
                    pass
            except InvalidStatus:
                pass
            # ElevenLabs' browser form: the key in the first message; as LiveKit and Pipecat send it (a long
            # frame websockets' debug line cuts in the middle, losing the field's name), and with the name
            # escaped as JSON allows.
            settings = {"stability": 0.5, "similarity_boost": 0.75, "style": 0.0, "use_speaker_boost": True}
            for first in (
                json.dumps({"text": " ", "xi_api_key": key}),
                json.dumps({"text": " ", "voice_settings": settings, "generation_config": {
                    "chunk_length_schedule": [120, 160, 250, 290]}, "xi_api_key": key}),
                '{"text": " ", "xi\\u005fapi_key": "' + key + '"}',
            ):  # fmt: skip
                try:
                    async with websockets.connect(f"{ws_base}/v1/text-to-speech/af_heart/stream-input") as ws:
                        await ws.send(first)
                        await asyncio.wait_for(ws.recv(), 2)
                except Exception:
                    pass

    asyncio.run(sockets())
    for key in (RIGHT, WRONG):
        for headers in (
            {"Authorization": f"Bearer {key}"},
            {"xi-api-key": key},
            {"Authorization": f"Token {key}"},
            {"Authorization": f"Basic {key}"},
        ):
            httpx.get(f"{base}/v1/voices?api_key={key}", headers=headers, timeout=30)
            httpx.post(f"{base}/v1/speak?token={key}", headers=headers, json={"text": ""}, timeout=30)


@pytest.mark.slow
def test_a_real_servers_log_carries_no_key_in_any_form(kokoro_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "STREAMVOICE_AUTH_TOKEN": RIGHT, "STREAMVOICE_WARM_UP": "false",
           "KOKORO_MODEL_DIR": str(kokoro_dir)}  # fmt: skip
    log_path = tmp_path / "server.log"
    with log_path.open("wb") as log:
        # -v: every library's debug lines too (websockets logs its handshakes and frames there); trace:
        # uvicorn's ASGI scopes (query strings, subprotocols) and messages
        server = subprocess.Popen(
            [sys.executable, "-m", "streamvoice.cli", "-v", "serve", "--port", str(port), "--log-level", "trace"],
            stdout=log, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while True:
                assert server.poll() is None, log_path.read_text()
                try:
                    if httpx.get(base + "/ping", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)
            _every_key_form(base, base.replace("http", "ws", 1))
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(60)
    text = log_path.read_text()
    assert "WebSocket /tts/websocket" in text and "403" in text  # the lines that carried the key are there
    assert "api_key=***" in text
    assert "Started scope=[withheld]" in text  # the trace lines are there, their scopes withheld
    assert RIGHT not in text and WRONG not in text
    assert (
        "Logging error" not in text
    )  # every line still formats (uvicorn's access lines unpack their arguments)
