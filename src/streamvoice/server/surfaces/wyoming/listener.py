"""The Wyoming listener: a TCP (or unix) socket beside the HTTP server, its connections capped, each one a
``SpeechHandler`` (``wyoming``); started and stopped with the speech server's lifespan."""

from __future__ import annotations

import asyncio
import logging

from wyoming.server import AsyncServer

from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.wyoming.handler import SpeechHandler

log = logging.getLogger("streamvoice.wyoming")

DEFAULT_URI = "tcp://127.0.0.1:10200"


class WyomingServer:
    """The Wyoming listener, started and stopped with the speech server's lifespan."""

    def __init__(self, uri: str, service: SpeechService) -> None:
        self.uri = uri
        self.service = service
        self._server = AsyncServer.from_uri(uri)
        self.max_connections = connection_cap(service.config.wyoming_max_connections)
        self.connections = 0

    def _handler(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> SpeechHandler:
        """Over the cap, the connection is told ``server_busy`` and closed at once: idle sockets never pile
        up to the descriptor limit, where HTTP would stop accepting too (``tests/test_wyoming_server.py``)."""
        refuse = None
        if self.connections >= self.max_connections:
            refuse = ProtocolError(
                ErrorCode.SERVER_BUSY,
                f"this server holds {self.max_connections} Wyoming connections; close one or retry later",
            )
        self.connections += 1
        return SpeechHandler(reader, writer, self.service, refuse, on_close=self._closed)

    def _closed(self) -> None:
        self.connections -= 1

    async def start(self) -> None:
        # start(), not run(): run() would take over SIGTERM, which belongs to the HTTP server's drain.
        await self._server.start(self._handler)
        log.info("wyoming: listening on %s (at most %d connections)", self.uri, self.max_connections)

    async def stop(self) -> None:
        await self._server.stop()


def connection_cap(configured: int) -> int:
    """The configured cap, kept well under the process's descriptor limit (HTTP needs its share)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, ValueError, OSError):
        return configured
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return configured
    return max(1, min(configured, soft // 4))
