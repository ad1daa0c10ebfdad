"""The one way an HTTP speech answer starts, for ``/invocations`` and the OpenAI-style routes alike: the
token, a slot, the body, the request, then the first audio; everything that can still be an HTTP error
with a status happens here, and the slot is released on every path that does not hand it on.

The slot is reserved before the body is read, so the session cap holds for callers arriving together; the
first audio is awaited before any header is sent, so a full server, nothing speakable or a failed
synthesis is a status, not a cut stream. A new HTTP surface supplies ``parse`` (its body to a request)
and renders ``Started`` as its body.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from streamvoice.asgi import error_response
from streamvoice.protocol import ProtocolError, parse_json_object
from streamvoice.server.core.requests import ResolvedRequest
from streamvoice.server.core.service import SpeechService
from streamvoice.server.core.slots import reserve
from streamvoice.server.surfaces.guards import authorized, service_of, unauthorized
from streamvoice.server.surfaces.http_stream import Item, TimedStream, audio_body, first_audio

# A surface's body to a request (and what else it needs of the body); awaited, so a request naming something
# kept in the store (a pronunciation dictionary) is resolved before the slot's first audio.
type Parse[T] = Callable[[dict[str, Any], SpeechService], Awaitable[tuple[ResolvedRequest, T]]]


@dataclass
class Started[T]:
    service: SpeechService
    parsed: T  # what the surface's ``parse`` made of the body, beside the request
    resolved: ResolvedRequest
    first: Item
    pieces: AsyncGenerator[Item]
    release: Callable[[], None]  # gives the slot back when the answer ends

    def respond(
        self, body: AsyncGenerator[bytes] | None, media: str, headers: dict[str, str] | None = None
    ) -> TimedStream:
        """The answer as a streamed response (``body`` None: the audio alone), slot released at its end."""
        chunks = audio_body(self.resolved, self.first, self.pieces) if body is None else body
        timeout = self.service.config.send_timeout_s
        return TimedStream(chunks, media, self.service.metrics, timeout, headers, self.release)


async def start_answer[T](
    request: Request,
    parse: Parse[T],
    headers: dict[str, str] | None = None,
    render: Callable[[ProtocolError, dict[str, str] | None], Response] = error_response,
) -> Started[T] | Response:
    """The answer's first audio, or the error response to send instead (``render``: the surface's error
    shape, by default ``asgi.error_response``'s, with the surface's ``headers``)."""
    service = service_of(request)
    if not authorized(request, service):
        return render(unauthorized(), headers)
    try:
        slot = reserve(service)  # counted from here: simultaneous requests cannot all pass the cap
    except ProtocolError as exc:
        return render(exc, headers)
    assert service is not None
    try:
        obj = parse_json_object(await request.body(), service.config.limits)
        resolved, parsed = await parse(obj, service)
        first, pieces = await first_audio(service, resolved, slot)
    except ProtocolError as exc:
        slot.release()
        service.metrics.count_error(str(exc.code))
        return render(exc, headers)
    except BaseException:
        slot.release()
        raise
    return Started(service, parsed, resolved, first, pieces, slot.release)


async def audio_answer[T](
    request: Request,
    parse: Parse[T],
    media: Callable[[ResolvedRequest], str],
    render: Callable[[ProtocolError, dict[str, str] | None], Response] = error_response,
    headers: dict[str, str] | None = None,
) -> Response:
    """A route whose answer is the audio alone, streamed (``media``: its content type for the request)."""
    started = await start_answer(request, parse, render=render)
    if isinstance(started, Response):
        return started
    return started.respond(None, media(started.resolved), headers)


class ClientLeft(Exception):
    """The caller closed the connection before its whole answer was ready."""


async def until_disconnect[T](request: Request, work: Awaitable[T]) -> T:
    """``work``, cancelled the moment the client disconnects: an answer sent whole is made before anything
    is written, so no failed send would ever tell that nobody waits for it."""
    task = asyncio.ensure_future(work)

    async def client_left() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.ensure_future(client_left())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
    if task.cancelled():
        raise ClientLeft
    return task.result()
