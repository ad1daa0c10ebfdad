"""Running the speech server: uvicorn with the transport limits that follow from the configuration, and a
graceful drain on SIGTERM. ``streamvoice serve``, the tests and the benchmarks build it the same way.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.applications import Starlette

from streamvoice import log_redaction
from streamvoice.engine.kokoro import KokoroEngine
from streamvoice.request_head import raise_file_limit, with_head_deadline
from streamvoice.server.app import create_app
from streamvoice.server.core.config import ServerConfig
from streamvoice.server.core.service import SpeechService


def transport_options(config: ServerConfig) -> dict[str, Any]:
    """uvicorn settings that follow from the server's limits; ``serve`` and the tests use the same ones.

    The WebSocket frame limit sits above ``max_message_bytes`` so an oversized message is answered
    ``message_too_large`` and the session goes on; only frames past this hard cap close it with 1009. Each
    request's head has a deadline, and connections open at once a cap (``request_head``).
    """
    return {
        "http": with_head_deadline(config.head_timeout_s, raise_file_limit(config.max_connections)),
        "ws_max_size": max(4 * config.max_message_bytes, 256 * 1024),
        "ws_ping_interval": config.ws_ping_interval_s,
        "ws_ping_timeout": config.ws_ping_timeout_s,
    }


def build_server(config: ServerConfig, engine: KokoroEngine | None = None, **uvicorn: Any) -> DrainingServer:
    """The server exactly as ``streamvoice serve`` runs it (``engine`` lets tests share a loaded model)."""
    return DrainingServer(
        create_app(config, engine),
        config.host,
        config.port,
        drain_timeout_s=config.drain_timeout_s,
        **{**transport_options(config), **uvicorn},
    )


class DrainingServer:
    """uvicorn with a graceful shutdown: on the first SIGTERM/SIGINT, /ping goes unhealthy and sessions
    finish their queued messages and close with 1001; the process exits once they are gone or after
    ``drain_timeout_s``. A second signal exits at once."""

    def __init__(
        self, app: Starlette, host: str, port: int, drain_timeout_s: float = 15.0, **kwargs: Any
    ) -> None:
        import uvicorn

        self.app = app
        self.drain_timeout_s = drain_timeout_s
        outer = self

        class _Server(uvicorn.Server):
            def handle_exit(self, sig: int, frame: Any) -> None:
                if outer._draining or outer._loop is None:
                    super().handle_exit(sig, frame)
                    return
                outer._draining = True
                outer._loop.call_soon_threadsafe(lambda: outer._loop.create_task(outer._drain()))  # type: ignore[union-attr]

            async def startup(self, sockets: Any = None) -> None:
                outer._loop = asyncio.get_running_loop()
                await super().startup(sockets)

        self._draining = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.server = _Server(uvicorn.Config(app, host=host, port=port, **kwargs))
        log_redaction.install()  # no key in any log line (``create_app`` installs it too)

    def request_shutdown(self) -> None:
        """What a signal does; callable from any thread."""
        self.server.handle_exit(15, None)

    async def _drain(self) -> None:
        service: SpeechService | None = getattr(self.app.state, "service", None)
        if service is not None:
            service.begin_drain()
            deadline = asyncio.get_running_loop().time() + self.drain_timeout_s
            # Sessions finish what they hold; streamed answers (HTTP and Wyoming) finish speaking.
            while (service.connections or service.rooms.streams) and (
                asyncio.get_running_loop().time() < deadline
            ):
                await asyncio.sleep(0.05)
        self.server.should_exit = True

    def run(self) -> None:
        self.server.run()
