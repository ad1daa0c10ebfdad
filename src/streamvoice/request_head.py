"""A deadline on each HTTP request's head, which uvicorn lacks: its keep-alive timer starts only after a
first answer and restarts with every byte, so a connection that sends half a request line, or trickles its
headers a byte at a time, is held for good (Slowloris, CVE-2007-6750), and enough of them exhaust the
process's connections. Middleware cannot help: it runs only once the head has been parsed.

The deadline runs from the connection opening and again from each answer; it stops when a head is complete
(so a long streamed answer or a WebSocket session is never cut). A head that started and did not finish is
answered 408; a connection that sent nothing is closed. Bodies have their own bound (``asgi``). The speech
server takes the deadline from ``head_timeout_s``; the agent uses ``HEAD_TIMEOUT_S``.

The same protocol caps the connections open at once (HTTP and WebSocket together, uvicorn's
``server_state.connections``): past the cap a new connection is answered 503 and closed before anything is
read, so a flood of idle connections meets a clear refusal instead of the process's file limit (EMFILE), and
``raise_file_limit`` lifts the soft limit to the hard one at start so the cap, not the kernel, is what binds.
Checked by ``pytest tests/test_request_head.py``.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from streamvoice.timer import Timer

log = logging.getLogger("streamvoice.server")

HEAD_TIMEOUT_S = 10.0  # as the speech server's ``head_timeout_s`` default
MAX_CONNECTIONS = 4096  # as the speech server's ``max_connections`` default
FILES_BESIDE_CONNECTIONS = 256  # descriptors the process keeps for itself (model, store, logs, threads)


def raise_file_limit(max_connections: int) -> int:
    """Lift the soft limit on open files to the hard one; the connection cap that limit leaves room for
    (``max_connections``, or less when even the hard limit is lower, so the cap still binds first)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        wanted = max_connections + FILES_BESIDE_CONNECTIONS
        target = wanted if hard == resource.RLIM_INFINITY else min(hard, max(soft, wanted))
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    room = max(1, soft - FILES_BESIDE_CONNECTIONS)
    if room < max_connections:
        log.warning(
            "the open-file limit (%d) leaves room for %d connections, not %d: raise `ulimit -n`", soft, room,
            max_connections,
        )  # fmt: skip
    return min(max_connections, room)


def busy_response(limit: int) -> bytes:
    body = (
        f"the server holds {limit} connections, its most; retry shortly, or reuse a kept-alive connection\n"
    ).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
        f"retry-after: 1\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


def overdue_response(seconds: float) -> bytes:
    body = (
        f"the request line and headers did not arrive within {seconds:g} s of the connection opening "
        "(or of the last answer); send each request whole\n"
    ).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


def with_head_deadline(seconds: float, max_connections: int = MAX_CONNECTIONS) -> type[H11Protocol]:
    """uvicorn's HTTP/1.1 protocol (h11) with the deadline and the connection cap; pass it as uvicorn's
    ``http``."""

    class HeadDeadlineProtocol(H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._head_timer = Timer(self._overdue)

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:  # counted itself: the cap is passed
                transport.write(busy_response(max_connections))
                transport.close()
                return
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._head_timer.disarm()
            super().connection_lost(exc)

        def handle_events(self) -> None:
            super().handle_events()
            if not self._waiting_for_head():  # a head arrived (or the socket was handed to a WebSocket)
                self._head_timer.disarm()

        def on_response_complete(self) -> None:
            self._arm()  # before the pipelined request uvicorn may handle at once, which then disarms it
            super().on_response_complete()

        def _waiting_for_head(self) -> bool:
            return self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)

        def _arm(self) -> None:
            if self.transport.is_closing():
                self._head_timer.disarm()
            else:
                self._head_timer.arm(seconds)

        def _overdue(self) -> None:
            if self.transport.is_closing() or not self._waiting_for_head():
                return
            if self.conn.trailing_data[0]:  # part of a head waits in h11's buffer: tell the client why
                self.transport.write(overdue_response(seconds))
            log.debug("closed %s: no whole request head within %g s", self.client, seconds)
            self.transport.close()

    return HeadDeadlineProtocol
