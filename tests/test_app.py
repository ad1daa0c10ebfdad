"""The SageMaker container contract over real HTTP on loopback."""

from __future__ import annotations

import base64
import json

import httpx
import numpy as np
import pytest

from streamvoice.engine import KokoroEngine
from tests.helpers import RunningServer

TWO_SENTENCES = (
    "First, a short sentence. Then a second sentence follows it, long enough to be its own piece of audio."
)


def test_ping_is_healthy_after_warm_up(scripted_server: RunningServer) -> None:
    r = httpx.get(scripted_server.url + "/ping")
    assert r.status_code == 200 and r.json() == {"status": "ok"}


def test_invocations_streams_pcm_per_piece(scripted_server: RunningServer) -> None:
    chunks: list[bytes] = []
    with httpx.stream(
        "POST", scripted_server.url + "/invocations", json={"text": TWO_SENTENCES}, timeout=60
    ) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("audio/L16")
        for chunk in r.iter_raw():
            chunks.append(chunk)
    audio = np.frombuffer(b"".join(chunks), "<i2")
    assert audio.size / 24_000 > 3.0
    assert len(chunks) >= 2  # the first piece left before the second was synthesised


@pytest.mark.parametrize(
    ("fmt", "ctype"), [("wav", "audio/wav"), ("mp3", "audio/mpeg"), ("opus", "audio/ogg")]
)
def test_invocations_formats(scripted_server: RunningServer, fmt: str, ctype: str) -> None:
    r = httpx.post(
        scripted_server.url + "/invocations", json={"text": "Hello there.", "format": fmt}, timeout=60
    )
    assert r.status_code == 200 and r.headers["content-type"].startswith(ctype)
    assert len(r.content) > 1000


def test_invocations_sse_for_response_streams(scripted_server: RunningServer) -> None:
    r = httpx.post(
        scripted_server.url + "/invocations", json={"text": "Hi there.", "stream": "sse"}, timeout=60
    )
    events = [json.loads(block[len("data: ") :]) for block in r.text.split("\n\n") if block]
    assert next(e["type"] for e in events) == "audio_start" and events[-1]["type"] == "audio_end"
    audio = b"".join(base64.b64decode(e["data"]) for e in events if e["type"] == "audio_chunk")
    assert len(audio) > 24_000


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"not json", "invalid_json"),
        (b"[1]", "invalid_message"),
        (b"\xff\xfe", "invalid_utf8"),
        (b"{}", "missing_text"),
        (b'{"text": ""}', "empty_text"),
        (b'{"text": "hi", "voice": "af_nobody"}', "unknown_voice"),
        (b'{"text": "hi", "speed": 9}', "invalid_speed"),
        (b'{"text": "hi", "format": "vorbis"}', "unsupported_format"),
        (json.dumps({"text": "a " * 1500}).encode(), "text_too_long"),
        (b"x" * 20_000, "message_too_large"),
        (b'{"text": "..."}', "empty_text"),
    ],
)
def test_invocations_bad_input_is_4xx_json(scripted_server: RunningServer, body: bytes, code: str) -> None:
    r = httpx.post(scripted_server.url + "/invocations", content=body, timeout=30)
    assert 400 <= r.status_code < 500
    err = r.json()["error"]
    assert err["code"] == code and len(err["message"]) > 10


def test_live_answers_while_ping_says_not_ready(engine: KokoroEngine) -> None:
    from starlette.testclient import TestClient

    from streamvoice.server import ServerConfig, create_app

    client = TestClient(create_app(ServerConfig(), engine=engine))  # no lifespan: still starting
    assert client.get("/ping").status_code == 503
    live = client.get("/live")
    assert live.status_code == 200 and live.json() == {"status": "alive", "state": "starting"}


def test_ping_is_503_until_warm(engine: KokoroEngine) -> None:
    """A server whose app has not finished start-up answers 503, never a misleading 200."""
    from starlette.testclient import TestClient

    from streamvoice.server import ServerConfig, create_app

    app = create_app(ServerConfig(), engine=engine)
    client = TestClient(app)  # no lifespan: the service never started
    r = client.get("/ping")
    assert r.status_code == 503 and r.json()["error"]["code"] == "not_ready"


def test_an_unknown_route_is_answered_in_its_wires_error_shape(scripted_server: RunningServer) -> None:
    """A voice id with "/" took ElevenLabs' clients to Starlette's plain-text "Not Found"."""
    r = httpx.post(scripted_server.url + "/v1/text-to-speech/af/heart", json={"text": "Hi."})
    assert r.status_code == 404 and r.json()["detail"]["status"] == "not_found"
    assert "'/'" in r.json()["detail"]["message"]
    r = httpx.get(scripted_server.url + "/no/such/route")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    # In plain English (it said "the server has no this route").
    assert r.json()["error"]["message"] == "GET /no/such/route: this server has no such route"
    r = httpx.get(scripted_server.url + "/invocations")  # a route, not this method
    assert r.status_code == 405 and r.json()["error"]["code"] == "not_found"
    assert r.json()["error"]["message"] == "GET /invocations: this route does not take that method"
