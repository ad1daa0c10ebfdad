"""`server.runner`: the server as `streamvoice serve` runs it; a drain (what SIGTERM starts) answers every message."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from websockets.asyncio.client import connect

from streamvoice.engine import KokoroEngine
from tests.helpers import answers as next_answers
from tests.helpers import (
    start_speech_server,
    wait_for,
)

# --- 16. auth before state ------------------------------------------------------------------------------------
# (covered with the bearer token tests in test_reliability: 403 at the upgrade, /metrics behind the token)

# --- 17. drain and lifetime -----------------------------------------------------------------------------------


async def test_messages_sent_during_a_drain_are_answered(engine: KokoroEngine) -> None:
    server = await asyncio.to_thread(start_speech_server, engine, warm_up=False)
    try:
        async with connect(server.ws_url) as ws:
            await ws.send(json.dumps({"text": "Finishing this one. " * 4, "id": "before"}))
            assert json.loads(await asyncio.wait_for(ws.recv(), 30))["type"] == "synthesis_started"
            server.drainer.request_shutdown()  # what SIGTERM does
            await wait_for(lambda: httpx.get(server.url + "/ping").status_code == 503)
            live = httpx.get(server.url + "/live")  # readiness is gone, liveness stays
            assert live.status_code == 200 and live.json()["state"] == "draining"
            assert "streamvoice_draining 1" in httpx.get(server.url + "/metrics").text
            await ws.send(json.dumps({"text": "Arrived during the drain.", "id": "late"}))
            answers = {c["id"]: c for c in await next_answers(ws, 2, timeout=60)}
            assert answers["before"]["type"] == "synthesis_complete"
            assert answers["late"]["code"] == "going_away"
            final = json.loads(await asyncio.wait_for(ws.recv(), 10))
            assert final["code"] == "going_away"
            with pytest.raises(Exception):  # noqa: B017 - closed 1001
                await asyncio.wait_for(ws.recv(), 10)
            assert ws.close_code == 1001
    finally:
        await asyncio.to_thread(server.stop)
