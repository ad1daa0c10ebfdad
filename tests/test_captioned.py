"""`server.captioned`: the captioned speech route (audio with word timestamps), its answers counted and stopped with their caller."""

from __future__ import annotations

import asyncio
import json
import socket

import httpx

from streamvoice.engine import KokoroEngine
from tests.helpers import (
    metric,
    start_speech_server,
    wait_for,
)

# --- 23. an unstreamed captioned answer is counted and stops with its caller ----------------------------------


async def test_unstreamed_captioned_speech_is_counted_and_cancelled(busy_scripted: KokoroEngine) -> None:
    server = await asyncio.to_thread(start_speech_server, busy_scripted, warm_up=False, max_sessions=2)
    try:
        body = json.dumps({"input": "A long answer that nobody will wait for. " * 200, "stream": False})
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.sendall(
            b"POST /dev/captioned_speech HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body.encode()
        )
        await wait_for(lambda: metric(server, "streamvoice_active_streams") == 1)  # read 0
        sock.close()
        await wait_for(lambda: metric(server, "streamvoice_active_streams") == 0)
        await wait_for(lambda: metric(server, "streamvoice_queue_depth") == 0)
        r = httpx.post(
            server.url + "/dev/captioned_speech", json={"input": "Short.", "stream": False}, timeout=60
        )
        assert r.status_code == 200 and r.json()["audio"] and r.json()["timestamps"]
    finally:
        await asyncio.to_thread(server.stop)
