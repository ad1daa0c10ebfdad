"""Cartesia's speech socket (``/tts/websocket``) and what its HTTP routes share with it: the request's fields and
the events' shapes (``http.py``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket

from streamvoice.engine.alignment import WordTime
from streamvoice.protocol import (
    SAMPLE_RATES,
    ErrorCode,
    ProtocolError,
    text_field,
    validate_speed,
)
from streamvoice.server.core.events import Completed
from streamvoice.server.core.requests import ResolvedRequest, SessionDefaults
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.cartesia.dictionaries import dictionary_for
from streamvoice.server.surfaces.contexts import Context, ContextSocket, Frame, b64, context_id, serve
from streamvoice.server.surfaces.guards import caller
from streamvoice.server.surfaces.upgrade import BrowserKey
from streamvoice.server.surfaces.vendor_voices import vendor_language, vendor_voices

VENDOR = "Cartesia"
ENCODINGS = {"pcm_s16le": "pcm", "pcm_f32le": "f32", "pcm_mulaw": "ulaw", "pcm_alaw": "alaw"}
CONTAINERS = ("raw", "wav", "mp3")
CREATED = "2025-01-01T00:00:00Z"
BROWSER_KEY = BrowserKey(query=("api_key", "access_token"))  # the SDK's browser path puts it there


def _bad(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_FIELD, message)


def output_format(raw: object, containers: tuple[str, ...] = ("raw",)) -> tuple[str, int]:
    """Cartesia's ``output_format`` object as (our format, rate)."""
    if not isinstance(raw, dict):
        raise _bad(
            '"output_format" must be {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000}'
        )
    container = raw.get("container", "raw")
    if container not in containers:
        raise _bad(f'"output_format.container" must be one of {", ".join(containers)}')
    rate = raw.get("sample_rate", 24000)
    if not isinstance(rate, int) or isinstance(rate, bool) or rate not in SAMPLE_RATES:
        raise _bad(f'"output_format.sample_rate" must be one of {", ".join(map(str, SAMPLE_RATES))}')
    if container == "mp3":
        if rate not in (22050, 24000, 44100):
            raise _bad('mp3 "output_format.sample_rate" must be 22050, 24000 or 44100')
        return "mp3", int(rate)
    encoding = raw.get("encoding", "pcm_s16le")
    if not isinstance(encoding, str) or encoding not in ENCODINGS:
        raise _bad(f'"output_format.encoding" must be one of {", ".join(ENCODINGS)}')
    if container == "wav":
        if encoding != "pcm_s16le":
            raise _bad('a wav container carries "pcm_s16le"')
        return "wav", int(rate)
    return ENCODINGS[encoding], int(rate)


def _voice(raw: object) -> object:
    if isinstance(raw, dict):
        if raw.get("mode", "id") != "id":
            raise _bad('"voice" must be {"mode": "id", "id": "<voice>"}: embeddings are not offered')
        return raw.get("id")
    return raw


def _speed(obj: dict[str, Any]) -> float | None:
    config = obj.get("generation_config")
    raw = config.get("speed") if isinstance(config, dict) else obj.get("speed")
    if raw is None or isinstance(raw, str):  # the old API's "slow" / "fast" words: the normal rate
        return None
    return validate_speed(raw)


def resolve(
    service: SpeechService, obj: dict[str, Any], text: str = "", containers: tuple[str, ...] = ("raw",)
) -> ResolvedRequest:
    fmt, rate = output_format(obj.get("output_format"), containers)
    voice = vendor_voices(service).resolve(_voice(obj.get("voice")), VENDOR)
    return service.requests.resolve(
        SessionDefaults(),
        voice,
        _speed(obj),
        fmt,
        vendor_language(obj.get("language")),
        sample_rate=rate,
        ssml=False,
        text=text,
    )


def chunk_event(data: bytes, step_ms: float, **ids: Any) -> dict[str, Any]:
    """Audio, on the socket (``ids``: its context and flush) and over SSE alike."""
    return {
        "type": "chunk",
        "data": b64(data),
        "done": False,
        "status_code": 206,
        "step_time": step_ms,
        **ids,
    }


def timestamps_event(times: list[WordTime], **ids: Any) -> dict[str, Any]:
    """A piece's word times in seconds, on the socket and over SSE alike."""
    stamps = {
        "words": [w.word for w in times],
        "start": [round(w.start_ms / 1000, 3) for w in times],
        "end": [round(w.end_ms / 1000, 3) for w in times],
    }
    return {"type": "timestamps", "done": False, "status_code": 206, **ids, "word_timestamps": stamps}


def error_event(error: ProtocolError, context_id: str | None) -> dict[str, Any]:
    return {
        "type": "error",
        "context_id": context_id,
        "done": True,
        "status_code": error.http_status,
        "error_code": str(error.code),
        "title": str(error.code).replace("_", " "),
        "message": error.message,
        "error": error.message,
    }


@dataclass
class CartesiaContext:
    """What Cartesia's wire keeps per context."""

    timestamps: bool = False  # ``add_timestamps``: word times are sent
    flushes: int = 0  # ``flush`` messages so far (each answered ``flush_done`` with its number)
    flush_id: int = 1  # the flush the chunks being sent belong to


class CartesiaSocket(ContextSocket[CartesiaContext]):
    name = "cartesia"

    def new_state(self) -> CartesiaContext:
        return CartesiaContext()

    def __init__(self, ws: WebSocket, service: SpeechService, connection_id: str) -> None:
        super().__init__(ws, service, connection_id)
        self._unnamed = 0

    async def on_object(self, obj: dict[str, Any]) -> bool:
        cid = context_id(obj.get("context_id"))
        if cid is None:
            self._unnamed += 1
            cid = f"ctx-{self._unnamed}"  # a request without a context is one whole answer
        ctx = self.open.get(cid)
        if obj.get("cancel") is True:
            self.cancel(cid)
            return False
        transcript = text_field(obj, "transcript", cid) or ""
        if ctx is None:
            if (why := self.closed.get(cid)) is not None:
                how = "was cancelled" if why == "cancelled" else "has ended (continue was false)"
                raise ProtocolError(
                    ErrorCode.INVALID_MESSAGE, f"context {cid[:64]!r} {how}; use a new context_id", cid
                )
            try:
                request = resolve(self.service, obj)
                prepare = dictionary_for(self.service, caller(self.ws), obj.get("pronunciation_dict_id"))
            except ProtocolError as exc:
                raise exc.naming(id=cid) from None
            ctx = self.start(cid, request, prepare)  # its dictionary fetched before planning
            if ctx is None:
                return False
            ctx.wire.timestamps = obj.get("add_timestamps") is True
        if transcript:
            self.append(ctx, transcript)
        if obj.get("flush") is True:  # answered flush_done once what came before it is spoken
            ctx.wire.flushes += 1
            ctx.utterance.mark(ctx.wire.flushes)
        if obj.get("continue") is not True:
            self.end(ctx)
        return False

    def render_audio(self, ctx: Context[CartesiaContext], data: bytes, samples: int) -> list[Frame]:
        step = round(samples * 1000 / self.service.sample_rate, 1)
        return [json.dumps(chunk_event(data, step, context_id=ctx.id, flush_id=ctx.wire.flush_id))]

    def render_marked(self, ctx: Context[CartesiaContext], label: int) -> list[Frame]:
        ctx.wire.flush_id = label + 1  # the chunks after it belong to the next flush
        body = {
            "type": "flush_done",
            "done": False,
            "flush_done": True,
            "flush_id": label,
            "status_code": 206,
            "context_id": ctx.id,
        }
        return [json.dumps(body)]

    def render_words(self, ctx: Context[CartesiaContext], times: list[WordTime]) -> list[Frame]:
        if not ctx.wire.timestamps or not times:
            return []
        return [json.dumps(timestamps_event(times, context_id=ctx.id))]

    def render_completed(self, ctx: Context[CartesiaContext], done: Completed) -> list[Frame]:
        return [json.dumps({"type": "done", "done": True, "status_code": 206, "context_id": ctx.id})]

    def error_frame(self, error: ProtocolError, context_id: str | None) -> Frame | None:
        return json.dumps(error_event(error, context_id))


async def websocket(ws: WebSocket) -> None:
    await serve(ws, CartesiaSocket, _refusal, BROWSER_KEY)


def _refusal(error: ProtocolError) -> Frame:
    return json.dumps(error_event(error, None))


ROUTES = [WebSocketRoute("/tts/websocket", websocket)]
