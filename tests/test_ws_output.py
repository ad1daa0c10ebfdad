"""`server.ws_output`: what a WebSocket surface sends is paced and bounded, and a client that reads at playback
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


async def test_an_aborted_connection_closes_without_waiting_for_its_writer() -> None:
    """A reader that gave up on its client (replies past the cap) ends the connection now: the writer,
    blocked behind an answer nobody reads, is cancelled and the close is sent. Waiting for the writer kept
    the listener slot after the client had gone."""
    from streamvoice.server.surfaces.connection import run_reader_and_writer

    closed: list[tuple[int, str]] = []
    writer_cancelled = asyncio.Event()

    class Output:
        async def close(self, code: int, reason: str) -> None:
            closed.append((code, reason))

    async def reader() -> None:
        nonlocal aborted
        aborted = (1008, "too many unanswered frames")

    async def writer() -> None:
        try:
            await asyncio.Event().wait()  # blocked on a client that reads nothing
        except asyncio.CancelledError:
            writer_cancelled.set()
            raise

    aborted: tuple[int, str] | None = None
    await run_reader_and_writer(reader(), writer(), Output(), lambda: aborted)  # type: ignore[arg-type]
    assert closed == [(1008, "too many unanswered frames")] and writer_cancelled.is_set()


async def test_a_reader_that_ends_normally_lets_the_writer_finish_what_is_queued() -> None:
    from streamvoice.server.surfaces.connection import run_reader_and_writer

    sent: list[str] = []

    class Output:
        async def close(self, code: int, reason: str) -> None:
            sent.append("close")

    async def reader() -> None:
        return None  # queued its close behind the answers

    async def writer() -> None:
        for frame in ("answer", "close"):
            await asyncio.sleep(0)
            sent.append(frame)

    await run_reader_and_writer(reader(), writer(), Output(), lambda: None)  # type: ignore[arg-type]
    assert sent == ["answer", "close"]
