"""The one way an HTTP speech answer starts, for ``/invocations`` and the OpenAI-style routes alike: the
token, a seat, the body, the request, then the first audio; everything that can still be an HTTP error
with a status happens here, and the seat is left on every path that does not hand it on.

The seat's room is taken before the body is read, so the session cap holds for callers arriving together; the
first audio is awaited before any header is sent, so a full server, nothing speakable or a failed
synthesis is a status, not a cut stream. A new HTTP surface supplies ``parse`` (its body to a request) and
its error shape, and answers with ``Started.respond`` (a streamed body in its ``http_body.Body``'s form) or
``Started.whole`` (one JSON object made once the audio is all there).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from streamvoice.asgi import ErrorResponse, error_response
from streamvoice.protocol import ProtocolError, parse_json_object
from streamvoice.server.core.requests import ResolvedRequest
from streamvoice.server.core.seat import Seat
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.guards import authorized, service_of, unauthorized
from streamvoice.server.surfaces.http_body import Body, Gathered, Item, rendered
from streamvoice.server.surfaces.http_stream import TimedStream, first_audio

# A surface's body to a request (and what else it needs of the body); awaited, so a request naming something
# kept in the store (a pronunciation dictionary) is resolved before the first audio.
type Parse[T] = Callable[[dict[str, Any], SpeechService], Awaitable[tuple[ResolvedRequest, T]]]


@dataclass
class Started[T]:
    service: SpeechService
    parsed: T  # what the surface's ``parse`` made of the body, beside the request
    resolved: ResolvedRequest
    first: Item
    pieces: AsyncGenerator[Item]
    release: Callable[[], None]  # gives the seat back when the answer ends (``Seat.leave``)
    render: ErrorResponse  # the surface's error shape
    headers: dict[str, str] | None = None  # on every answer of the surface's, errors too

    async def items(self) -> AsyncGenerator[Item]:
        """Encoded audio as it is ready, word times in their place; closing it stops the work behind it (a
        client that left or timed out releases its queued model calls)."""
        async with aclosing(self.pieces) as rest:
            yield self.first
            async for item in rest:
                yield item

    def respond(self, body: Body, media: str) -> TimedStream:
        """The answer as a streamed response in ``body``'s form, the seat left at its end."""
        timeout = self.service.config.send_timeout_s
        chunks = rendered(self.items(), body)
        return TimedStream(chunks, media, self.service.metrics, timeout, self.headers, self.release)

    async def whole[M](
        self, request: Request, gathered: Gathered[M], reply: Callable[[bytes, list[M]], Response]
    ) -> Response:
        """One body made once all the audio is there (``reply`` of the audio and its marks): nothing is
        written before, so only a watch on the connection tells that the caller left (then 499, and the work
        stops); a failure is the surface's error; the seat is left on every path."""
        try:
            await until_disconnect(request, _drained(rendered(self.items(), gathered)))
        except ClientLeft:
            return Response(status_code=499)
        except ProtocolError as exc:
            return self.render(exc, self.headers)
        finally:
            self.release()
        return reply(bytes(gathered.whole), gathered.found)


async def _drained(frames: AsyncGenerator[bytes]) -> None:
    async with aclosing(frames):
        async for _ in frames:
            pass


async def start_answer[T](
    request: Request,
    parse: Parse[T],
    headers: dict[str, str] | None = None,
    render: ErrorResponse = error_response,
) -> Started[T] | Response:
    """The answer's first audio, or the error response to send instead (``render``: the surface's error
    shape, by default ``asgi.error_response``'s, with the surface's ``headers``)."""
    service = service_of(request)
    if not authorized(request, service):
        return render(unauthorized(request), headers)
    try:
        seat = Seat.alone(service)  # counted from here: simultaneous requests cannot all pass the cap
    except ProtocolError as exc:
        return render(exc, headers)
    try:
        await seat.claim()  # the tenant's cap across replicas
        obj = parse_json_object(await request.body(), seat.service.config.limits)
        resolved, parsed = await parse(obj, seat.service)
        first, pieces = await first_audio(seat, resolved)
    except ProtocolError as exc:
        seat.leave()
        seat.service.metrics.count_error(str(exc.code))
        return render(exc, headers)
    except BaseException:
        seat.leave()
        raise
    return Started(seat.service, parsed, resolved, first, pieces, seat.leave, render, headers)


async def audio_answer[T](
    request: Request,
    parse: Parse[T],
    media: Callable[[ResolvedRequest], str],
    render: ErrorResponse = error_response,
    headers: dict[str, str] | None = None,
) -> Response:
    """A route whose answer is the audio alone, streamed (``media``: its content type for the request)."""
    started = await start_answer(request, parse, headers, render)
    if isinstance(started, Response):
        return started
    return started.respond(Body(), media(started.resolved))


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
