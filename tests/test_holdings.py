"""``core.rooms.holding``: whatever a request or a connection reserved is given back however it ends. A
failure injected at each step of the HTTP start sequence, mid-body, and at each step of a socket's answer,
on a server keeping one listener: ``/metrics`` returns to idle and the next caller is served (a response
header that failed to encode after the slot was taken kept it for good: every later call was 503)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, Iterator
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from streamvoice.engine import KokoroEngine
from streamvoice.server.core.admission import Admission
from streamvoice.server.core.requests import Resolver
from streamvoice.server.core.seat import Seat
from streamvoice.server.core.utterances import Utterances
from streamvoice.server.surfaces import http_answer, http_stream, websocket, writer
from streamvoice.server.surfaces.writer import Writer
from tests.helpers import RunningServer, start_speech_server

IDLE = {
    "streamvoice_active_streams": 0.0,
    "streamvoice_active_sessions": 0.0,
    "streamvoice_admitted_listeners": 0.0,
}


@pytest.fixture(scope="module")
def one_listener(scripted: KokoroEngine) -> Iterator[RunningServer]:
    """What every path out gives back is bookkeeping, not sound: the scripted engine serves it."""
    server = start_speech_server(scripted, admission_listeners=1)
    yield server
    server.stop()


def _gauges(server: RunningServer) -> dict[str, float]:
    text = httpx.get(server.url + "/metrics", timeout=30).text
    lines = (line.split() for line in text.splitlines() if line.split() and line.split()[0] in IDLE)
    return {name: float(value) for name, value in lines}


def _until_idle(server: RunningServer) -> None:
    """Waits for the gauges to read idle (an answer's close runs after its last byte); fails if they never do."""
    deadline = time.monotonic() + 30
    while (gauges := _gauges(server)) != IDLE:
        assert time.monotonic() < deadline, f"still held: {gauges}"
        time.sleep(0.05)


def _served(server: RunningServer) -> None:
    """The next caller is served whole: not refused for a slot that was never given back."""
    r = httpx.post(server.url + "/v1/audio/speech", json={"input": "Hi.", "voice": "af_heart"}, timeout=60)
    assert r.status_code == 200 and len(r.content) > 1000, r.text[:200]


def _boom(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("injected failure")


def _header_fails(*args: Any, **kwargs: Any) -> Any:
    raise UnicodeEncodeError("latin-1", "☃", 0, 1, "ordinal not in range(256)")  # what Starlette raised


async def _one_chunk_then_boom(*args: Any, **kwargs: Any) -> AsyncGenerator[bytes]:
    yield b"\0" * 4800
    raise RuntimeError("injected failure mid-body")


HTTP_STEPS: dict[str, tuple[Any, str, Any]] = {
    "body": (http_answer, "parse_json_object", _boom),
    "parse": (Resolver, "resolve", _boom),
    "admission": (Admission, "admit", _boom),
    "utterance": (Utterances, "start", _boom),
    "gate": (Seat, "gate", _boom),
    "first audio": (http_stream, "encoded_events", _boom),
    "response headers": (http_stream.TimedStream, "__init__", _header_fails),
    "mid-body": (http_answer, "rendered", _one_chunk_then_boom),
}
ROUTES = {
    "deepgram": ("/v1/speak?model=aura-2-thalia-en&encoding=linear16", {"text": "Hi there."}),
    "openai": ("/v1/audio/speech", {"input": "Hi there.", "voice": "af_heart", "response_format": "pcm"}),
    "invocations": ("/invocations", {"text": "Hi there."}),
}


@pytest.mark.parametrize("step", HTTP_STEPS)
def test_a_failure_at_any_step_of_an_http_answer_gives_everything_back(
    one_listener: RunningServer, step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner, name, failure = HTTP_STEPS[step]
    with monkeypatch.context() as patch:
        patch.setattr(owner, name, failure)
        for path, body in ROUTES.values():
            try:
                with httpx.stream("POST", one_listener.url + path, json=body, timeout=60) as r:
                    r.read()
                assert r.status_code >= 400 or step == "mid-body", (path, r.status_code)
            except httpx.HTTPError:
                pass  # a body cut short after its status
            _until_idle(one_listener)
    _served(one_listener)


def test_a_client_gone_after_the_headers_gives_everything_back(one_listener: RunningServer) -> None:
    long_text = "A sentence that goes on for a while, and then some more. " * 20
    with httpx.stream(
        "POST", one_listener.url + "/v1/speak?encoding=linear16", json={"text": long_text}
    ) as r:
        assert r.status_code == 200
        next(r.iter_raw())
    _until_idle(one_listener)
    _served(one_listener)


def test_a_request_value_echoed_in_a_header_is_made_safe(one_listener: RunningServer) -> None:
    """The attack itself: ``model=☃`` was copied raw into ``dg-model-name``: a 500 after the slot was taken."""
    for path in ("/v1/speak", "/v2/speak"):
        r = httpx.post(one_listener.url + path + "?model=%E2%98%83%0D%0AX-Evil:%201", json={"text": "Hi."})
        assert r.status_code == 200 and r.headers["dg-model-name"] == "%E2%98%83%0D%0AX-Evil: 1"
        assert "x-evil" not in r.headers
        _until_idle(one_listener)
    r = httpx.post(
        one_listener.url + "/v1/audio/speech",
        json={"input": "Hi.", "voice": "af_heart"},
        headers={"x-request-id": "r\xe9q".encode("latin-1")},  # latin-1, as a client may send it
    )
    assert r.status_code == 200 and r.headers["x-request-id"] == "r%C3%A9q"
    _until_idle(one_listener)


async def _send_boom(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError("injected failure while sending")


SOCKET_STEPS: dict[str, tuple[Any, str, Any]] = {
    "gate": (Seat, "gate", _boom),
    "answer": (Writer, "_answer", _boom),
    "events": (writer, "encoded_events", _boom),
    "send": (websocket.WebSocketTransport, "send", _send_boom),
    "start": (Utterances, "start", _boom),
}
SOCKETS = {
    "session": ("/invocations-bidirectional-stream", json.dumps({"type": "speak", "text": "Hi there."})),
    "deepgram": ("/v1/speak?encoding=linear16", json.dumps({"type": "Speak", "text": "Hi there."})),
}


@pytest.mark.parametrize("step", SOCKET_STEPS)
def test_a_failure_at_any_step_of_a_sockets_answer_gives_everything_back(
    one_listener: RunningServer, step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner, name, failure = SOCKET_STEPS[step]
    with monkeypatch.context() as patch:
        patch.setattr(owner, name, failure)
        for path, message in SOCKETS.values():
            try:
                with connect(one_listener.url.replace("http", "ws", 1) + path, open_timeout=30) as ws:
                    ws.send(message)
                    if path.startswith("/v1/speak"):
                        ws.send(json.dumps({"type": "Flush"}))
                    ws.recv(timeout=5)  # whatever it says (an error in the wire's shape), or a close
            except (ConnectionClosed, TimeoutError, EOFError):
                pass
            _until_idle(one_listener)
    _served(one_listener)
