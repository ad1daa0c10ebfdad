"""``server.surfaces.websocket``: what a WebSocket surface sends is paced and bounded, and a client that reads at playback
speed is never taken for a slow one."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
from websockets.asyncio.client import connect

from streamvoice.engine import KokoroEngine
from tests.helpers import (
    start_speech_server,
)


async def test_a_reader_at_playback_speed_is_never_disconnected(engine: KokoroEngine) -> None:
    # Keepalive and send timeout squeezed (1 s ping, 2 s pong timeout, 3 s send timeout, 1 s send-ahead),
    # so what took minutes to break at the defaults breaks within seconds if pacing is wrong.
    server = await asyncio.to_thread(
        start_speech_server, engine, warm_up=False, ws_ping_interval_s=1.0, ws_ping_timeout_s=2.0,
        send_timeout_s=3.0, max_send_ahead_s=1.0,
    )  # fmt: skip
    try:
        # ~5 s of audio: several ping intervals, and longer than the pong timeout and the send timeout
        text = "We read this answer exactly as fast as a phone line plays it back to the caller."
        async with connect(server.ws_url, max_queue=1) as ws:
            await ws.send(json.dumps({"text": text, "id": "rt"}))
            played = 0.0
            started = time.monotonic()
            while True:
                frame = await asyncio.wait_for(ws.recv(), 30)
                if isinstance(frame, bytes):
                    played += len(frame) / 48_000
                    await asyncio.sleep(max(0.0, started + played - time.monotonic()))  # playback speed
                    continue
                event = json.loads(frame)
                if event["type"] in ("synthesis_complete", "error"):
                    break
        assert event["type"] == "synthesis_complete" and played > 4
        assert 'code="slow_consumer"' not in httpx.get(server.url + "/metrics").text
    finally:
        await asyncio.to_thread(server.stop)
