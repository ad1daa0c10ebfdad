"""The deadline on each HTTP request's head (``streamvoice.request_head``), on the speech server as ``serve``
builds it: a head that never ends is answered 408 and closed, trickled bytes do not extend it, a silent
connection is closed, and nothing that has sent its head is cut (a long streamed answer, a WebSocket
session, the next request on a kept-alive connection)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import Iterator

import httpx
import pytest
from websockets.asyncio.client import connect

from streamvoice.engine import KokoroEngine
from streamvoice.request_head import overdue_response
from tests.helpers import RunningServer, answers, start_speech_server

DEADLINE_S = 0.5


@pytest.fixture(scope="module")
def server(busy_scripted: KokoroEngine) -> Iterator[RunningServer]:
    """Answers that take seconds (the scripted engine sleeps 5 ms a frame): longer than the deadline."""
    running = start_speech_server(busy_scripted, head_timeout_s=DEADLINE_S)
    yield running
    running.stop()


def until_closed(sock: socket.socket, trickle: bytes = b"") -> bytes:
    """Everything the server sends until it closes the connection, sending ``trickle`` a byte at a time
    (one every tenth of the deadline) meanwhile. A byte sent after the server closed makes the kernel reset
    the connection, which may discard what was answered: a reset counts as closed."""
    received = b""
    sock.settimeout(DEADLINE_S / 10)
    for _ in range(600):  # a minute at most: a server that never closes fails here
        if trickle:
            with contextlib.suppress(OSError):  # already closed: read what was answered
                sock.sendall(trickle[:1])
            trickle = trickle[1:]
        try:
            data = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return received
        if not data:
            return received
        received += data
    raise AssertionError("the server kept the connection open")


def silent_connection_closed(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        return until_closed(sock)


def test_a_head_that_never_ends_is_answered_408_and_closed(server: RunningServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n")  # the blank line never comes
        answer = until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408 ") and b"send each request whole" in answer


def test_trickled_bytes_do_not_extend_the_deadline(server: RunningServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        # 228 bytes, one every 0.05 s: 11 s of trickle, and the head is never complete
        answer = until_closed(sock, trickle=b"GET /ping HTTP/1.1\r\n" + b"X-Slow: " + b"a" * 200)
    assert answer in (b"", overdue_response(DEADLINE_S))  # closed at the deadline (its 408 lost to a reset)


def test_a_connection_that_sends_nothing_is_closed(server: RunningServer) -> None:
    assert silent_connection_closed(server.port) == b""


def test_a_kept_alive_connection_gets_the_deadline_again_after_each_answer(server: RunningServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n")  # the second head stops half way
        answer = until_closed(sock)
    first, _, rest = answer.partition(b"\r\n\r\n")
    assert first.startswith(b"HTTP/1.1 200 ") and b"HTTP/1.1 408 " in rest


def test_a_streamed_answer_longer_than_the_deadline_is_not_cut(server: RunningServer) -> None:
    text = "The museum opens at nine in the morning, and the guided tours start every half hour. " * 3
    with httpx.Client(timeout=60) as client:
        with client.stream(
            "POST",
            server.url + "/v1/audio/speech",
            json={"input": text, "voice": "af_heart", "response_format": "pcm"},
        ) as response:
            assert response.status_code == 200
            chunks = [len(chunk) for chunk in response.iter_bytes()]
        # the same connection, kept alive, serves the next request
        assert client.get(server.url + "/ping").status_code == 200
    assert len(chunks) > 1 and sum(chunks) > 24_000 * 2 * 5  # seconds of audio, streamed in parts


async def test_a_websocket_session_outlives_the_deadline(server: RunningServer) -> None:
    async with connect(server.ws_url) as ws:
        # A connection opened after the handshake and sending nothing: once the server has closed it, the
        # session's own deadline would have passed too. The handshake was its head: nothing runs against it.
        assert await asyncio.to_thread(silent_connection_closed, server.port) == b""
        await ws.send(json.dumps({"type": "synthesize", "text": "Still here.", "id": "w"}))
        (answer,) = await answers(ws, 1)
    assert answer["type"] == "synthesis_complete" and answer["id"] == "w"


def test_connections_past_the_cap_are_refused_503_and_the_server_goes_on(busy_scripted: KokoroEngine) -> None:
    """Issue #64: 20,400 idle connections from one client reached the process's file limit (EMFILE; /ping
    slowed to 1.8 s). Past ``max_connections`` a new one is answered 503 and closed before anything is read;
    once some close, callers are served again."""
    running = start_speech_server(busy_scripted, max_connections=3)
    held: list[socket.socket] = []
    try:
        for _ in range(3):
            held.append(socket.create_connection(("127.0.0.1", running.port)))
        with socket.create_connection(("127.0.0.1", running.port)) as sock:
            refused = until_closed(sock)
        assert refused.startswith(b"HTTP/1.1 503 ") and b"3 connections" in refused
        for sock in held:
            sock.close()
        held.clear()
        for _ in range(100):  # the server notices the closes on its own loop
            if httpx.get(running.url + "/ping").status_code == 200:
                break
        assert httpx.get(running.url + "/ping").status_code == 200
    finally:
        for sock in held:
            sock.close()
        running.stop()
