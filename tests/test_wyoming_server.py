"""`server.wyoming_server`: the Wyoming TCP listener, its connection cap and idle timeout, against a real server."""

from __future__ import annotations

import asyncio
import resource

from wyoming.client import AsyncTcpClient
from wyoming.info import Describe

from streamvoice.asgi import free_port
from streamvoice.engine import KokoroEngine
from tests.helpers import (
    ping,
    start_speech_server,
)


async def closed(reader: asyncio.StreamReader, timeout: float = 60.0) -> bytes:
    """Everything the server sends until it closes the connection."""
    async with asyncio.timeout(timeout):
        return await reader.read()


# --- 26. Wyoming connections are capped and idle out ------------------------------------------------------


async def test_wyoming_connections_are_capped(engine: KokoroEngine) -> None:
    port = free_port()
    server = await asyncio.to_thread(
        start_speech_server, engine, warm_up=False, wyoming_uri=f"tcp://127.0.0.1:{port}",
        wyoming_max_connections=8, idle_timeout_s=2.0,
    )  # fmt: skip
    try:
        conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(30)]
        refused = 0
        for reader, _ in conns[8:]:
            answer = await closed(reader)
            refused += b"server_busy" in answer
        assert refused == 22
        assert await ping(server) == 200
        # the eight held ones idle out
        for reader, _ in conns[:8]:
            assert b"idle_timeout" in await closed(reader)
        for _, writer in conns:
            writer.close()
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(Describe().event())
            assert (await client.read_event()) is not None
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        from streamvoice.server.surfaces.wyoming.listener import connection_cap

        assert connection_cap(10**9) <= soft // 4
    finally:
        await asyncio.to_thread(server.stop)
