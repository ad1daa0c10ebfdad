"""ElevenLabs' text-to-speech API on the speech server, so its SDKs and the frameworks' ElevenLabs plugins
reach Kokoro by changing their base URL.

- ``WS /v1/text-to-speech/{voice_id}/stream-input``: one context; ``{"text": " "}`` opens it, text
  follows as it is written (``"flush": true`` speaks what is buffered), ``{"text": ""}`` ends it; the answer
  is ``{"audio", "alignment", "normalizedAlignment"}`` messages, then ``{"isFinal": true}`` and a close.
- ``WS /v1/text-to-speech/{voice_id}/multi-stream-input``: the same with ``context_id`` on every message,
  ``{"context_id", "close_context": true}`` (its text is spoken, then ``isFinal``), ``{"close_socket": true}``;
  ``{"text": ""}`` is a keep-alive. A context that gets words while an older, closed one still speaks takes
  the voice (its clients close a context to interrupt it and open the next).
- ``POST /v1/text-to-speech/{voice_id}`` (and ``/stream``): audio; ``/with-timestamps`` (one JSON object)
  and ``/stream/with-timestamps`` (a JSON object per line): base64 audio with character times.
- ``GET /v1/voices`` and, with ``xi-api-key``, ``GET /v1/models`` in ElevenLabs' shapes.

Alignment follows the wire: on the WebSocket each message's character times are relative to that
message's audio (the client keeps the running clock); over HTTP they run from the start of the answer, in
seconds. ``output_format`` is ``pcm_<rate>``, ``ulaw_8000``, ``alaw_8000`` or ``mp3_<rate>_<kbps>``. The key
goes in ``xi-api-key`` and carries the server's AUTH_TOKEN; ``model_id`` is accepted and answered as Kokoro.
Errors are ElevenLabs' ``{"detail": {"status", "message"}}`` over HTTP and ``{"message", "error"}`` on the
socket. Checked by ``pytest tests/test_elevenlabs.py``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from streamvoice.engine.alignment import WordTime
from streamvoice.engine.voices import LANGUAGES
from streamvoice.protocol import (
    ErrorCode,
    ProtocolError,
    check_text,
    required_text,
    text_field,
    validate_speed,
    whole_number,
)
from streamvoice.server.core.piece_audio import Words
from streamvoice.server.core.requests import ResolvedRequest, SessionDefaults
from streamvoice.server.core.service import SpeechService
from streamvoice.server.surfaces.connection import Answer
from streamvoice.server.surfaces.contexts import Context, ContextSocket, Frame, b64, context_id, serve
from streamvoice.server.surfaces.guards import authorized, listing_service, service_of, unauthorized
from streamvoice.server.surfaces.http_answer import ClientLeft, start_answer, until_disconnect
from streamvoice.server.surfaces.http_stream import encoded
from streamvoice.server.surfaces.vendor_voices import vendor_language, vendor_voices

VENDOR = "ElevenLabs"
RATES = (8000, 16000, 22050, 24000, 44100, 48000)
DEFAULT_FORMAT = "mp3_44100_128"
MODEL_IDS = ("eleven_flash_v2_5", "eleven_turbo_v2_5", "eleven_multilingual_v2", "eleven_v3")
STATUS = {400: "invalid_request", 401: "invalid_api_key", 404: "not_found", 413: "text_too_long"}


def output_format(raw: str | None) -> tuple[str, int]:
    """ElevenLabs' ``output_format`` as (our format, rate)."""
    name = (raw or DEFAULT_FORMAT).strip().lower()
    kind, _, rest = name.partition("_")
    rate_text = rest.split("_")[0]
    rate = whole_number(rate_text) or 0
    if kind == "pcm" and rate in RATES:
        return "pcm", rate
    if kind in ("ulaw", "alaw") and rate == 8000:
        return kind, rate
    if kind == "mp3" and rate in (22050, 24000, 44100):
        return "mp3", rate
    raise ProtocolError(
        ErrorCode.UNSUPPORTED_FORMAT,
        f"output_format {name[:32]!r} is not offered; use pcm_8000 ... pcm_48000, ulaw_8000, alaw_8000 or "
        "mp3_22050_32 ... mp3_44100_192",
        param="output_format",
    )


def _speed(settings: object) -> float | None:
    if isinstance(settings, dict) and settings.get("speed") is not None:
        return validate_speed(settings["speed"])
    return None


def resolve(
    service: SpeechService,
    voice_id: str,
    fmt: str | None,
    text: str = "",
    settings: object = None,
    lang: object = None,
) -> ResolvedRequest:
    our_format, rate = output_format(fmt)
    voice = vendor_voices(service).resolve(voice_id, VENDOR)
    return service.requests.resolve(
        text,
        SessionDefaults(),
        voice,
        _speed(settings),
        our_format,
        vendor_language(lang),
        sample_rate=rate,
        ssml=False,
    )


# --- character alignment --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Char:
    char: str
    start_ms: float
    end_ms: float


def characters(times: list[WordTime], leading_space: bool) -> list[Char]:
    """Words as characters: each word's span shared by its letters, a space between words filling the gap
    (ElevenLabs' alignment is per character, spaces included)."""
    chars: list[Char] = []
    previous_end: float | None = None
    for i, w in enumerate(times):
        if i > 0 or leading_space:
            gap_start = previous_end if previous_end is not None else w.start_ms
            chars.append(Char(" ", gap_start, max(gap_start, w.start_ms)))
        step = (w.end_ms - w.start_ms) / max(len(w.word), 1)
        chars += [Char(c, w.start_ms + k * step, w.start_ms + (k + 1) * step) for k, c in enumerate(w.word)]
        previous_end = w.end_ms
    return chars


def message_chars(pending: list[Char], end_ms: float, inside_word: bool) -> tuple[list[Char], list[Char]]:
    """The characters a message ending at ``end_ms`` carries, and those left for later messages.

    Those that start before its end; and where none does inside a word (a message shorter than one of its
    letters), the next letter, placed at the message's end: a message without characters gets a space as
    its filler, and a space inside a word splits it in two for the clients that build words from
    characters (Pipecat read "morning." as "morni" and "ng."). Between words the filler space is right.
    """
    count = sum(1 for c in pending if c.start_ms < end_ms)
    if count == 0 and pending and inside_word and pending[0].char != " ":
        count = 1
    return pending[:count], pending[count:]


def ws_alignment(chars: list[Char], offset_ms: float, end_ms: float) -> dict[str, list[Any]]:
    """The characters that start in a message spanning [``offset_ms``, ``end_ms``) of the answer, relative
    to its start. Their spans are clipped to the message and a space fills the rest, so the last start plus
    its duration is the message's own length: a client that adds each message's span to its clock (as the
    wire's rule implies) stays in step with the audio. Whole milliseconds from the answer's start are
    rounded once, so the clock does not drift over many messages."""
    first, last = round(offset_ms), round(end_ms)
    names: list[str] = []
    starts: list[int] = []
    durations: list[int] = []
    for c in chars:
        start = min(max(round(c.start_ms), first), last)
        end = min(max(round(c.end_ms), start), last)
        names.append(c.char)
        starts.append(start - first)
        durations.append(end - start)
    reached = first + (starts[-1] + durations[-1] if names else 0)
    if reached < last or not names:
        names.append(" ")
        starts.append(reached - first)
        durations.append(last - reached)
    return {"chars": names, "charStartTimesMs": starts, "charDurationsMs": durations}


def http_alignment(chars: list[Char]) -> dict[str, list[Any]]:
    return {
        "characters": [c.char for c in chars],
        "character_start_times_seconds": [round(c.start_ms / 1000, 3) for c in chars],
        "character_end_times_seconds": [round(c.end_ms / 1000, 3) for c in chars],
    }


# --- WebSocket ------------------------------------------------------------------------------------------


def ws_error(error: ProtocolError, context_id: str | None) -> str:
    body: dict[str, Any] = {"message": error.message, "error": str(error.code), "code": 1008}
    if context_id is not None:
        body["contextId"] = context_id
    return json.dumps(body)


class ElevenLabsSocket(ContextSocket):
    name = "elevenlabs"
    newest_takes_over = True

    def __init__(self, ws: WebSocket, service: SpeechService, connection_id: str, multi: bool) -> None:
        super().__init__(ws, service, connection_id)
        self.multi = multi
        self.voice_id = ws.path_params.get("voice_id", "")
        self.query = ws.query_params
        self.request = resolve(
            service, self.voice_id, self.query.get("output_format"), lang=self.query.get("language_code")
        )  # checked before the accept: a bad format or voice is a refused upgrade's reason
        self._single_done = False

    async def on_object(self, obj: dict[str, Any]) -> bool:
        cid = (context_id(obj.get("context_id", obj.get("contextId"))) if self.multi else "0") or "default"
        if obj.get("close_socket") is True:
            for open_ctx in list(self.open.values()):
                self.end(open_ctx)
            return True
        ctx = self.open.get(cid)
        if obj.get("close_context") is True:
            if ctx is not None:
                self.end(ctx)
            return False
        text = text_field(obj, "text", cid)
        if text is None and obj.get("flush") is not True:
            raise ProtocolError(
                ErrorCode.MISSING_TEXT,
                'send {"text": "..."} (or "flush", "close_context", "close_socket")',
                cid,
            )
        if ctx is None:
            if not self.multi and self._single_done:
                raise ProtocolError(
                    ErrorCode.INVALID_MESSAGE, "this stream has ended; open a new connection for more", cid
                )
            if text == "":
                return False  # a keep-alive for a context not open: nothing to do
            speed = _speed(obj.get("voice_settings"))
            request = self.request if speed is None else replace(self.request, speed=speed)
            ctx = self.start(cid, request)
            if ctx is None:
                return False
            self._single_done = not self.multi
            ctx.wire["pending"] = []
        if text:
            self.append(ctx, text)
        if obj.get("flush") is True:
            self.flush(ctx)
        if text == "" and not self.multi:
            self.end(ctx)  # stream-input: the empty text ends the stream (multi-stream: a keep-alive)
        return False

    def words_frame(self, ctx: Context, times: list[WordTime]) -> Frame | None:
        ctx.wire["pending"] = ctx.wire.get("pending", []) + characters(times, bool(ctx.wire.get("said")))
        ctx.wire["said"] = True
        return None

    def audio_frames(self, ctx: Context, data: bytes, samples: int) -> list[Frame]:
        rate = self.service.sample_rate
        start_ms = ctx.sent_samples * 1000 / rate
        end_ms = start_ms + samples * 1000 / rate
        now, ctx.wire["pending"] = message_chars(
            ctx.wire.get("pending", []), end_ms, ctx.wire.get("in_word", False)
        )
        ctx.wire["in_word"] = bool(now) and now[-1].char != " "
        alignment = ws_alignment(now, start_ms, end_ms)  # on every message: the client's clock moves by it
        body: dict[str, Any] = {
            "audio": b64(data),
            "isFinal": None,
            "alignment": alignment,
            "normalizedAlignment": alignment,
        }
        if self.multi:
            body["contextId"] = ctx.id
        return [json.dumps(body)]

    def done_frame(self, ctx: Context) -> Frame | None:
        body: dict[str, Any] = {"isFinal": True}
        if self.multi:
            body["contextId"] = ctx.id
        return json.dumps(body)

    def cancelled_frame(self, ctx: Context) -> Frame | None:
        return self.done_frame(ctx)

    def error_frame(self, error: ProtocolError, context_id: str | None) -> Frame | None:
        return ws_error(error, context_id if self.multi else None)

    def after_answer(self, answer: Answer) -> bool:
        return not self.multi


async def stream_input(ws: WebSocket) -> None:
    await serve(ws, lambda ws, service, cid: ElevenLabsSocket(ws, service, cid, multi=False), _refusal)


async def multi_stream_input(ws: WebSocket) -> None:
    await serve(ws, lambda ws, service, cid: ElevenLabsSocket(ws, service, cid, multi=True), _refusal)


def _refusal(error: ProtocolError) -> Frame:
    return ws_error(error, None)


# --- HTTP -----------------------------------------------------------------------------------------------


def error_shape(error: ProtocolError) -> dict[str, Any]:
    return {"detail": {"status": STATUS.get(error.http_status, str(error.code)), "message": error.message}}


def http_error(error: ProtocolError, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse(error_shape(error), status_code=error.http_status, headers=headers)


def _parser(request: Request) -> Any:
    def parse(obj: dict[str, Any], service: SpeechService) -> tuple[ResolvedRequest, None]:
        text = required_text(obj)
        check_text(text, service.config.limits)
        voice_id = request.path_params.get("voice_id", "")
        fmt = request.query_params.get("output_format")
        return resolve(
            service, voice_id, fmt, text, obj.get("voice_settings"), obj.get("language_code")
        ), None

    return parse


async def speech(request: Request) -> Response:
    """``POST /v1/text-to-speech/{voice_id}`` and ``/stream``: the audio, streamed as it is made."""
    started = await start_answer(request, _parser(request), render=http_error)
    if isinstance(started, Response):
        return started
    resolved = started.resolved
    media = (
        "audio/mpeg"
        if resolved.format == "mp3"
        else "audio/basic"
        if resolved.format == "ulaw"
        else "audio/pcm"
    )
    return started.respond(None, media)


async def _timestamped(started: Any) -> AsyncGenerator[tuple[bytes, list[Char]]]:
    """Audio chunks with the characters that start in them, times from the answer's start."""
    pending: list[Char] = []
    said = False
    async with aclosing(encoded(started.first, started.pieces)) as chunks:
        async for data in chunks:
            if isinstance(data, Words):
                pending += characters(data.times, said)
                said = said or bool(data.times)
                continue
            yield data, pending
            pending = []


def _timestamped_body(audio: bytes, chars: list[Char]) -> dict[str, Any]:
    alignment = http_alignment(chars)
    return {"audio_base64": b64(audio), "alignment": alignment, "normalized_alignment": alignment}


async def with_timestamps(request: Request) -> Response:
    """``POST .../with-timestamps``: one JSON object (the whole audio and every character's time)."""
    started = await start_answer(request, _parser(request), render=http_error)
    if isinstance(started, Response):
        return started
    try:  # made whole before anything is sent: only the watch tells that the caller left
        audio, chars = await until_disconnect(request, _gathered(started))
    except ClientLeft:
        return Response(status_code=499)  # nobody reads it; the work behind it is already released
    except ProtocolError as exc:
        return http_error(exc)
    finally:
        started.release()
    return JSONResponse(_timestamped_body(bytes(audio), chars))


async def _gathered(started: Any) -> tuple[bytearray, list[Char]]:
    audio, chars = bytearray(), []
    async with aclosing(_timestamped(started)) as chunks:
        async for data, chunk_chars in chunks:
            audio += data
            chars += chunk_chars
    return audio, chars


async def stream_with_timestamps(request: Request) -> Response:
    """``POST .../stream/with-timestamps``: a JSON object per line, as each chunk is made."""
    started = await start_answer(request, _parser(request), render=http_error)
    if isinstance(started, Response):
        return started

    async def body() -> AsyncGenerator[bytes]:
        async for data, chars in _timestamped(started):
            yield (json.dumps(_timestamped_body(data, chars)) + "\n").encode()

    return started.respond(body(), "application/json")


async def voices(request: Request) -> Response:
    try:
        service = listing_service(request)
    except ProtocolError as exc:
        return http_error(exc)
    listed = [
        {
            "voice_id": v.name,
            "name": v.name,
            "category": "premade",
            "labels": {"language": v.lang, "gender": v.gender},
            "description": f"Kokoro-82M {v.language} {v.gender} voice",
            "preview_url": None,
        }
        for v in service.engine.voices()
    ]
    return JSONResponse({"voices": listed, "has_more": False, "total_count": len(listed)})


async def models(request: Request) -> Response:
    """ElevenLabs' model list (``GET /v1/models`` with ``xi-api-key``: the app routes it here)."""
    if not authorized(request, service_of(request)):
        return http_error(unauthorized())
    languages = [{"language_id": ours, "name": name} for ours, name in LANGUAGES.values()]
    listed = [
        {
            "model_id": model_id,
            "name": f"Kokoro-82M (answering for {model_id})",
            "can_do_text_to_speech": True,
            "can_do_voice_conversion": False,
            "can_use_style": False,
            "can_use_speaker_boost": False,
            "serves_pro_voices": False,
            "languages": languages,
            "description": "Kokoro-82M served by streamvoice",
        }
        for model_id in ("kokoro", *MODEL_IDS)
    ]
    return JSONResponse(listed)


ROUTES = [
    WebSocketRoute("/v1/text-to-speech/{voice_id}/stream-input", stream_input),
    WebSocketRoute("/v1/text-to-speech/{voice_id}/multi-stream-input", multi_stream_input),
    Route("/v1/text-to-speech/{voice_id}", speech, methods=["POST"]),
    Route("/v1/text-to-speech/{voice_id}/stream", speech, methods=["POST"]),
    Route("/v1/text-to-speech/{voice_id}/with-timestamps", with_timestamps, methods=["POST"]),
    Route("/v1/text-to-speech/{voice_id}/stream/with-timestamps", stream_with_timestamps, methods=["POST"]),
    Route("/v1/voices", voices, methods=["GET"]),
]
