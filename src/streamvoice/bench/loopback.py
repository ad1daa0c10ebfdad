"""A real uvicorn server for an ASGI app on a loopback port, in a background thread: how benchmarks and
tests run the speech server and the agent for real."""

from __future__ import annotations

import threading
import time
from typing import Any

from streamvoice.asgi import free_port


class LoopbackServer:
    """A real uvicorn server for an ASGI app, on a loopback port in a background thread."""

    def __init__(self, app: Any, port: int | None = None, server: Any = None, sockets: Any = None) -> None:
        """``server``: an already configured ``uvicorn.Server`` for ``app`` on ``port`` (as ``serve`` builds
        it); without one, plain uvicorn settings."""
        import uvicorn

        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.ws_url = f"ws://127.0.0.1:{self.port}/invocations-bidirectional-stream"
        self.server = server or uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", ws_max_size=1 << 20)
        )
        self._thread = threading.Thread(target=lambda: self.server.run(sockets=sockets), daemon=True)

    def start(self, timeout: float = 120.0) -> LoopbackServer:
        """Start serving and wait until ``/ping`` answers 200."""
        import httpx

        self._thread.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/ping", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError("server did not become healthy")

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(15)

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
