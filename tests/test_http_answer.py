"""`server.http_front`: how an HTTP speech answer starts (the token, a slot, the body in time), against a real server."""

from __future__ import annotations

import socket
from typing import Any

import httpx

from streamvoice.engine import KokoroEngine
from tests.helpers import (
    RunningServer,
    rss_mb,
    start_speech_server,
)

# --- 27. bodies are read only from callers with the token, and only for a while ----------------------------


def test_bodies_are_read_only_with_the_token_and_in_time(engine: KokoroEngine) -> None:
    server = start_speech_server(engine, warm_up=False, auth_token="secret", body_timeout_s=1.0)
    try:
        body_size = 1_000_000
        head = (
            b"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {body_size}\r\n\r\n".encode()
        )
        conns = []
        before = rss_mb()
        for _ in range(50):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            sock.sendall(head + b"x" * 1000)  # and the rest never
            conns.append(sock)
        for sock in conns:
            answer = recv_response(sock)
            assert b" 401 " in answer.split(b"\r\n", 1)[0] and b"unauthorized" in answer
            sock.close()
        assert rss_mb() - before < 50
        # With the token, a body that stops arriving is answered 408 after body_timeout_s.
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
        sock.sendall(head.replace(b"\r\n\r\n", b"\r\nAuthorization: Bearer secret\r\n\r\n") + b"{")
        answer = recv_response(sock)
        assert b" 408 " in answer.split(b"\r\n", 1)[0]
        sock.close()
        ok = httpx.post(
            server.url + "/invocations", json={"text": "Hi."}, headers={"Authorization": "Bearer secret"}
        )
        assert ok.status_code == 200
    finally:
        server.stop()


def recv_response(sock: socket.socket) -> bytes:
    received = b""
    while b"}}" not in received:
        chunk = sock.recv(4096)
        if not chunk:
            break
        received += chunk
    return received


def _raw_post(port: int, head: bytes, chunks: Any = ()) -> str:
    """Send a request as raw bytes (clients refuse to lie about lengths); the response as text."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head)
        for chunk in chunks:
            try:
                sock.sendall(chunk)
            except OSError:
                break  # the server answered and closed while we were still sending
        received = b""
        while b"}}" not in received:
            try:
                data = sock.recv(4096)
            except OSError:
                break
            if not data:
                break
            received += data
    return received.decode("latin-1")


def test_request_bodies_are_capped_before_they_are_read(scripted_server: RunningServer) -> None:
    # A declared 400 MB body is refused before a byte of it is read.
    declared = _raw_post(
        scripted_server.port,
        b"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 419430400\r\n\r\n{}",
    )
    assert declared.startswith("HTTP/1.1 413") and "message_too_large" in declared
    # 4 MB without a declared length: refused once past the limit.
    chunk = b"10000\r\n" + b"x" * 65536 + b"\r\n"
    undeclared = _raw_post(
        scripted_server.port,
        b"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n",
        [chunk] * 64,
    )
    assert undeclared.startswith("HTTP/1.1 413") and "message_too_large" in undeclared
