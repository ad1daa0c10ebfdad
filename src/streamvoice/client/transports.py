"""How a speech client reaches a session: the seam between callers and the wire.

A transport moves whole frames (text or bytes) both ways. The local WebSocket transport is here; the
SageMaker runtime's bidirectional stream plugs in behind the same three methods, so callers switch from a
``ws://`` URL to an endpoint name without other changes.
"""

from __future__ import annotations

from typing import Protocol

from streamvoice.protocol import WS_PATH


class TransportClosed(Exception):
    """The other side closed; ``reason`` says why when it said, ``code`` is the WebSocket close code
    (1006 when the connection dropped without one; None where the transport has no codes)."""

    def __init__(self, reason: str = "", code: int | None = None) -> None:
        super().__init__(reason or "connection closed")
        self.reason = reason
        self.code = code


class Transport(Protocol):
    async def send(self, frame: str | bytes) -> None: ...

    async def recv(self) -> str | bytes:
        """The next frame; raises TransportClosed at the end."""
        ...

    async def close(self) -> None: ...


class WebSocketTransport:
    def __init__(self, conn: object) -> None:
        self._conn = conn

    @classmethod
    async def connect(
        cls, url: str, token: str | None = None, open_timeout: float = 10.0, max_size: int | None = 2**24
    ) -> WebSocketTransport:
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidMessage, InvalidStatus

        headers = {"Authorization": f"Bearer {token}"} if token else None
        try:
            conn = await connect(
                normalize_ws_url(url),
                additional_headers=headers,
                open_timeout=open_timeout,
                max_size=max_size,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            hint = "; check the bearer token" if status in (401, 403) else ""
            raise TransportClosed(f"the server refused the session (HTTP {status}){hint}") from None
        except InvalidMessage:  # the server closed the socket mid-handshake (a replica going away)
            raise TransportClosed("the server closed the connection before the session opened") from None
        return cls(conn)

    async def send(self, frame: str | bytes) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            await self._conn.send(frame)  # type: ignore[attr-defined]
        except ConnectionClosed as exc:
            raise TransportClosed(_reason(exc), _code(exc)) from None

    async def recv(self) -> str | bytes:
        from websockets.exceptions import ConnectionClosed

        try:
            frame: str | bytes = await self._conn.recv()  # type: ignore[attr-defined]
            return frame
        except ConnectionClosed as exc:
            raise TransportClosed(_reason(exc), _code(exc)) from None

    async def close(self) -> None:
        await self._conn.close()  # type: ignore[attr-defined]


def _reason(exc: Exception) -> str:
    rcvd = getattr(exc, "rcvd", None)
    return f"{rcvd.code} {rcvd.reason}".strip() if rcvd is not None else ""


def _code(exc: Exception) -> int:
    rcvd = getattr(exc, "rcvd", None)
    return int(rcvd.code) if rcvd is not None else 1006


def normalize_ws_url(url: str) -> str:
    """Accept http(s)://host:port or ws(s)://host:port, with or without the session path."""
    if url.startswith("http://"):
        url = "ws://" + url[len("http://") :]
    elif url.startswith("https://"):
        url = "wss://" + url[len("https://") :]
    if not url.rstrip("/").endswith(WS_PATH):
        url = url.rstrip("/") + WS_PATH
    return url
