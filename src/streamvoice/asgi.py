"""What both HTTP services share at the transport: their error responses, and the guards they put in front
of their routes.

The guards are plain ASGI: they run before any route reads a byte, so a hostile request costs at most the
bound they enforce.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any, Protocol
from urllib.parse import quote

from starlette.responses import JSONResponse, StreamingResponse

from streamvoice.protocol import (
    BEARER_ONLY,
    ErrorCode,
    KeyForms,
    ProtocolError,
    whole_number,
)

log = logging.getLogger("streamvoice.asgi")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def header_value(text: str, limit: int = 200) -> str:
    """A value taken from a request, made safe to echo in a response header: printable ASCII kept, any other
    character (non-ASCII, CR, LF, controls) percent-encoded as UTF-8, at most ``limit`` characters. A raw
    ``model=☃`` echoed in ``dg-model-name`` failed to encode after the answer had taken its slot (#47)."""
    return quote(text, safe=" !\"#$&'()*+,-./:;<=>?@[\\]^_`{|}~")[:limit]


def error_body(
    code: ErrorCode | str, message: str, param: str | None = None, status: int = 400
) -> dict[str, Any]:
    """The HTTP error shape, OpenAI's: {"error": {"message", "type", "param", "code"}}, so the OpenAI SDK
    (and anything written for it) raises a typed error with our message and stable code."""
    kind = "server_error" if status >= 500 else "authentication_error" if status == 401 else ""
    kind = kind or ("rate_limit_error" if status == 429 else "invalid_request_error")
    if code == ErrorCode.QUOTA_EXCEEDED:  # what OpenAI answers a key past its quota, type and code alike
        kind = code = "insufficient_quota"
    return {"error": {"message": message, "type": kind, "param": param, "code": str(code)}}


def _retry_after(exc: ProtocolError) -> dict[str, str]:
    """A full server says when to try again."""
    return {"retry-after": "1"} if exc.code == ErrorCode.SERVER_BUSY else {}


ErrorShape = Callable[[ProtocolError], dict[str, Any]]


class ErrorResponse(Protocol):
    """An error as a route's response, in its wire's shape, with the route's headers."""

    def __call__(self, exc: ProtocolError, headers: dict[str, str] | None = None) -> JSONResponse: ...


def openai_shape(exc: ProtocolError) -> dict[str, Any]:
    return error_body(exc.code, exc.message, exc.param, exc.http_status)


def shaped_errors(shape: ErrorShape) -> ErrorResponse:
    """A wire's HTTP error: its body ``shape``, the status the code implies, and when to try again if the
    server is full; each vendor's routes answer in their vendor's shape, the same way."""

    def respond(exc: ProtocolError, headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse(
            shape(exc), status_code=exc.http_status, headers={**_retry_after(exc), **(headers or {})}
        )

    return respond


error_response = shaped_errors(openai_shape)  # the services' own routes: OpenAI's shape (``error_body``)


async def send_json_error(send: Send, exc: ProtocolError, shape: ErrorShape = openai_shape) -> None:
    """The same response, sent without a framework (from the guards, before any route), in the shape of
    the route's wire."""
    body = json.dumps(shape(exc)).encode()
    headers = [(k.encode(), v.encode()) for k, v in _retry_after(exc).items()]
    await send(
        {
            "type": "http.response.start",
            "status": exc.http_status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class TimedStreamingResponse(StreamingResponse):
    """A streamed answer that ends when the client leaves *or* stops reading for ``timeout_s``, and always
    closes its body and calls ``on_close`` once, however it ends.

    Closing the body is what releases the work behind it (queued model calls, an LLM stream, a turn): a
    caller that posts, reads nothing and leaves must not keep any of it.
    """

    def __init__(
        self,
        body: Any,
        media_type: str,
        timeout_s: float,
        headers: dict[str, str] | None = None,
        on_close: Callable[[], None] | None = None,
        on_timeout: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(body, media_type=media_type, headers=headers)
        self._timeout_s = timeout_s
        self._body = body
        self._on_close = on_close
        self._on_timeout = on_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._close()

    async def stream_response(self, send: Send) -> None:
        async def timed_send(message: Any) -> None:
            await asyncio.wait_for(send(message), timeout=self._timeout_s)

        try:
            await super().stream_response(timed_send)
        except TimeoutError:
            log.warning("streamed answer: client stopped reading for %.0f s; closing", self._timeout_s)
            if self._on_timeout is not None:
                self._on_timeout()
        finally:
            await self._close()

    async def _close(self) -> None:
        on_close, self._on_close = self._on_close, None
        aclose = getattr(self._body, "aclose", None)
        try:
            if aclose is not None:
                await aclose()
        finally:
            if on_close is not None:
                on_close()


class KeyCheck(Protocol):
    """Which keys are good (``store.keys.Keyring``): whether any is needed, and the one a caller's names."""

    @property
    def required(self) -> bool: ...

    def resolve(self, keys: list[str]) -> object | None: ...

    async def fresh(self) -> None:
        """Read the keys again if they are older than the ring's refresh period."""
        ...


class BodyLimit:
    """Refuse request bodies over ``max_bytes`` with 413 before the app sees them, read a body only from
    a caller that has a good key, and only for ``timeout_s``.

    A declared ``Content-Length`` over the limit is refused before a byte of the body is read; a chunked or
    undeclared body is read up to the limit and refused as soon as it passes it. The app then receives the
    body already read (at most ``max_bytes`` held), so no route can be made to buffer more. When ``keys``
    needs one, a request that carries a body without a good key (in any header a wire takes) is answered
    401 before any of it is read, so callers without one cannot make the server hold their bodies; every
    route that takes a body needs a key anyway. A body still arriving after ``timeout_s`` is answered 408.
    """

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        keys: KeyCheck | None = None,
        timeout_s: float = 10.0,
        shapes: Sequence[tuple[str, ErrorShape]] = (),
        forms: KeyForms = BEARER_ONLY,
    ) -> None:
        self.app = app
        self.forms = forms  # where the server's wires take a key, beside Authorization: Bearer
        self.max_bytes = max_bytes
        self.keys = keys
        self.timeout_s = timeout_s
        self.shapes = shapes  # (path prefix, error shape): a wire's routes answer in its own shape

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        shape = next((f for prefix, f in self.shapes if path.startswith(prefix)), openai_shape)
        declared = _header(scope, b"content-length")
        has_body = (declared not in (None, "0")) or _header(scope, b"transfer-encoding") is not None
        if has_body and self.keys is not None:
            await self.keys.fresh()  # a process without a refresh loop of its own (the agent) reads here
        if has_body and self._keyless(scope):
            await send_json_error(
                send, ProtocolError(ErrorCode.UNAUTHORIZED, self.forms.unauthorized_hint()), shape
            )
            return
        length = whole_number(declared, max_digits=18) if declared is not None else None
        if declared is not None and (length is None or length > self.max_bytes):
            await self._refuse(send, declared, shape)
            return
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.timeout_s):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":  # the client left while sending
                        return
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.max_bytes:
                        await self._refuse(send, None, shape)
                        return
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            await send_json_error(
                send,
                ProtocolError(
                    ErrorCode.TIMEOUT,
                    f"the request body did not arrive within {self.timeout_s:g} s; send it whole at once",
                ),
                shape,
            )
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _keyless(self, scope: Scope) -> bool:
        """A key is needed and none of those the request carries is good."""
        if self.keys is None or not self.keys.required:
            return False
        return self.keys.resolve(self.forms.presented(lambda h: _header(scope, h.encode()))) is None

    async def _refuse(self, send: Send, declared: str | None, shape: ErrorShape) -> None:
        size = (
            f"{declared} bytes"
            if declared and whole_number(declared, 18) is not None
            else "larger than the limit"
        )
        await send_json_error(
            send,
            ProtocolError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"request body is {size}; the limit is {self.max_bytes} bytes. Send less text per request.",
            ),
            shape,
        )


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1").strip()
    return None


LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")


def host_name(host_header: str) -> str:
    """``example.com:8080`` -> ``example.com``; ``[::1]:8080`` -> ``::1``."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class HostAllowList:
    """Serve only requests whose ``Host`` is one of ``hosts``: a service bound to loopback must not answer a
    page on another site whose DNS name was rebound to 127.0.0.1 (DNS rebinding)."""

    def __init__(self, app: ASGIApp, hosts: tuple[str, ...]) -> None:
        self.app = app
        self.hosts = frozenset(h.lower() for h in hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and self.hosts:
            host = host_name(_header(scope, b"host") or "")
            if host not in self.hosts:
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008, "reason": "host not allowed"})
                else:
                    await send_json_error(
                        send,
                        ProtocolError(
                            ErrorCode.HOST_NOT_ALLOWED, f"this service does not answer for host {host[:60]!r}"
                        ),
                    )
                return
        await self.app(scope, receive, send)


# --- a free loopback port (the demo, benchmarks and tests) ------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
