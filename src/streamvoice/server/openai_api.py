"""OpenAI's speech API on the speech server, so adopting it is a base-URL change.

- ``POST /v1/audio/speech``: OpenAI's request body; the answer streams one chunk per decoded window
  (``stream_format: "audio"``) or as SSE ``speech.audio.delta`` / ``speech.audio.done`` events
  (``stream_format: "sse"``; chosen by the body field only, since the OpenAI SDK sends
  ``Accept: application/octet-stream`` for both).
- ``GET /v1/audio/voices`` and ``GET /v1/models``: what OpenAI-compatible apps list in their pickers.
- ``POST /dev/captioned_speech``: Kokoro-FastAPI's route (NDJSON lines of base64 audio and word times), so
  its users switch without code changes.

The same service, scheduler, limits and bearer token as every other route; errors in OpenAI's shape with
our stable codes (``protocol.error_body``), and ``x-request-id`` on every answer.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import math
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from streamvoice.asgi import error_response
from streamvoice.engine.g2p.packs import NEEDS as LANGUAGE_PACKS
from streamvoice.engine.g2p.packs import status as pack_status
from streamvoice.engine.voices import LANGUAGES
from streamvoice.protocol import (
    DEFAULT_VOICE,
    MAX_SPEED,
    MIN_SPEED,
    SAMPLE_RATE,
    ErrorCode,
    Limits,
    ProtocolError,
    check_text,
    parse_json_object,
)
from streamvoice.server.guards import UNAUTHORIZED, authorized, reserve, service_of
from streamvoice.server.piece_audio import Words
from streamvoice.server.service import ResolvedRequest, SessionDefaults, SpeechService
from streamvoice.server.streams import Item, TimedStream, audio_body, encoded, first_audio, sse_event

FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")
CONTENT_TYPES = {
    "mp3": "audio/mpeg",
    "opus": "audio/opus",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}
STREAM_FORMATS = ("audio", "sse")
# OpenAI's voice names, for clients that accept nothing else (Pipecat's OpenAITTSService, some apps).
# Kokoro v1.0 has namesakes for five of them; the rest follow Kokoro-FastAPI's table where it has them.
OPENAI_VOICES = {
    "alloy": "af_alloy",
    "echo": "am_echo",
    "fable": "bm_fable",
    "nova": "af_nova",
    "onyx": "am_onyx",
    "ash": "af_nicole",
    "coral": "bf_emma",
    "sage": "am_michael",
    "shimmer": "af_sky",
    "ballad": "bm_lewis",
    "verse": "am_puck",
    "marin": "af_heart",
    "cedar": "am_fenrir",
}
MODELS = ("kokoro", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")
FRAMES_PER_SECOND = 40  # Kokoro's duration unit (600 samples at 24 kHz): what ``usage`` counts as output
CREATED = 1_735_689_600  # 2025-01-01, Kokoro v1.0's weights; /v1/models must say something


@dataclass(frozen=True)
class SpeechRequest:
    """An OpenAI speech request, checked; field names are OpenAI's, values ours."""

    input: str
    voice: str = DEFAULT_VOICE
    response_format: str = "mp3"
    speed: float = 1.0
    stream_format: str = "audio"
    lang: str | None = None
    stream: bool = True  # Kokoro-FastAPI's captioned speech: NDJSON lines (true) or one JSON object
    ssml: bool | None = None  # None: SSML when the input starts with <speak>


def _bad(code: ErrorCode, message: str, param: str) -> ProtocolError:
    return ProtocolError(code, message, param=param)


def kokoro_voice(raw: Any, known: frozenset[str]) -> str:
    """A Kokoro voice spec from OpenAI's ``voice``: a name, a blend, an OpenAI name, or ``{"id": ...}``."""
    if isinstance(raw, dict):
        raw = raw.get("id")
    if not isinstance(raw, str) or not raw.strip():
        raise _bad(
            ErrorCode.INVALID_FIELD,
            'voice must be a voice name such as "af_heart", a blend such as "af_heart(2)+am_michael(1)", '
            f'one of OpenAI\'s names ({", ".join(OPENAI_VOICES)}), or {{"id": "af_heart"}}',
            "voice",
        )
    name = raw.strip()
    if name.lower() in OPENAI_VOICES and name.lower() not in known:
        return OPENAI_VOICES[name.lower()]
    return name


def speech_request(obj: dict[str, Any], known: frozenset[str], limits: Limits) -> SpeechRequest:
    """Check an OpenAI speech body: each mistake names its field (``param``) and what to send instead."""
    text = obj.get("input")
    if not isinstance(text, str):
        raise _bad(ErrorCode.MISSING_TEXT, '"input" must be the text to speak, as a string', "input")
    try:
        check_text(text, limits, field="input")
    except ProtocolError as exc:
        exc.param = "input"
        raise
    fmt = obj.get("response_format") or "mp3"
    if not isinstance(fmt, str) or fmt.lower() not in FORMATS:
        shown = fmt[:20] if isinstance(fmt, str) else type(fmt).__name__
        raise _bad(
            ErrorCode.UNSUPPORTED_FORMAT,
            f'"response_format" {shown!r} is not supported; use one of {", ".join(FORMATS)}',
            "response_format",
        )
    speed = obj.get("speed", 1.0)
    if speed is None:
        speed = 1.0
    # A huge JSON integer overflows math.isfinite (and float()): compare it as the int it is.
    number = isinstance(speed, int | float) and not isinstance(speed, bool)
    if not number or (isinstance(speed, float) and not math.isfinite(speed)):
        raise _bad(
            ErrorCode.INVALID_SPEED, f'"speed" must be a number from {MIN_SPEED} to {MAX_SPEED}', "speed"
        )
    if not MIN_SPEED <= speed <= MAX_SPEED:
        shown = f"{float(speed):g}" if abs(speed) < 1e6 else "(a huge number)"
        raise _bad(
            ErrorCode.INVALID_SPEED,
            f'"speed" {shown} is outside what Kokoro speaks well ({MIN_SPEED}-{MAX_SPEED}; OpenAI allows '
            "0.25-4.0 but this server does not stretch audio). 1.0 is normal pace.",
            "speed",
        )
    stream_format = obj.get("stream_format") or "audio"
    if stream_format not in STREAM_FORMATS:
        raise _bad(ErrorCode.INVALID_FIELD, '"stream_format" must be "audio" or "sse"', "stream_format")
    lang = obj.get("lang_code", obj.get("lang"))
    if lang is not None:
        if not isinstance(lang, str) or not lang.strip() or len(lang) > 16:
            raise _bad(
                ErrorCode.INVALID_FIELD, '"lang_code" must be a language such as "a" or "en-us"', "lang_code"
            )
        lang = LANGUAGES.get(lang.strip().lower(), (lang.strip().lower(), ""))[0]
    return SpeechRequest(
        input=text,
        voice=kokoro_voice(obj.get("voice", DEFAULT_VOICE), known),
        response_format=fmt.lower(),
        speed=float(speed),
        stream_format=stream_format,
        lang=lang,
        stream=obj.get("stream", True) is not False,
        ssml=obj.get("ssml") if isinstance(obj.get("ssml"), bool) else None,
    )


def usage(text: str, samples: int, sample_rate: int) -> dict[str, int]:
    """OpenAI's usage block: input counted in words, output in Kokoro's 25 ms frames (no tokenizer of
    OpenAI's applies to a Kokoro model; these are the units its cost follows)."""
    words = len(text.split())
    frames = math.ceil(samples * FRAMES_PER_SECOND / sample_rate)
    return {"input_tokens": words, "output_tokens": frames, "total_tokens": words + frames}


# --- routes ---------------------------------------------------------------------------------------------


def _request_id(request: Request) -> dict[str, str]:
    return {"x-request-id": request.headers.get("x-request-id") or f"req_{uuid.uuid4().hex[:20]}"}


@dataclass
class _Started:
    service: SpeechService
    speech: SpeechRequest
    resolved: ResolvedRequest
    first: Item
    pieces: AsyncGenerator[Item]
    release: Callable[[], None]  # gives the listener slot back when the answer ends


async def _start(request: Request, headers: dict[str, str]) -> _Started | Response:
    """Auth, the slot, the body, and the first audio: everything that can still be an HTTP error. The
    slot is reserved before the body is parsed, so the cap holds for callers arriving together."""
    service = service_of(request)
    if not authorized(request, service):
        return error_response(UNAUTHORIZED, headers)
    try:
        slot = reserve(service)
    except ProtocolError as exc:
        return error_response(exc, headers)
    assert service is not None
    try:
        obj = parse_json_object(await request.body(), service.config.limits)
        speech = speech_request(obj, service.engine.voice_names, service.config.limits)
        resolved = service.resolve(
            speech.input,
            SessionDefaults(),
            speech.voice,
            speech.speed,
            speech.response_format,
            speech.lang,
            ssml=speech.ssml,
        )
        first, pieces = await first_audio(service, resolved, slot)
    except ProtocolError as exc:
        slot.release()
        if exc.param is None and exc.code == ErrorCode.UNKNOWN_VOICE:
            exc.param = "voice"
        service.metrics.count_error(str(exc.code))
        return error_response(exc, headers)
    except BaseException:
        slot.release()
        raise
    return _Started(service, speech, resolved, first, pieces, slot.release)


async def speech(request: Request) -> Response:
    headers = _request_id(request)
    started = await _start(request, headers)
    if isinstance(started, Response):
        return started
    speech, resolved, config = started.speech, started.resolved, started.service.config
    if speech.stream_format == "sse":
        samples = SampleCount()
        chunks = encoded(resolved, started.first, samples.count(started.pieces))
        body = _speech_sse(chunks, lambda: usage(speech.input, samples.value, SAMPLE_RATE))
        media = "text/event-stream"
    else:
        body, media = (
            audio_body(resolved, started.first, started.pieces),
            CONTENT_TYPES[speech.response_format],
        )
    metrics = started.service.metrics
    return TimedStream(body, media, metrics, config.send_timeout_s, headers, started.release)


async def captioned_speech(request: Request) -> Response:
    """Kokoro-FastAPI's captioned speech: with ``stream`` (default) NDJSON lines ``{"audio", "audio_format",
    "timestamps"}`` as audio is ready, each piece's words (seconds) on its first chunk; else one JSON."""
    headers = _request_id(request)
    started = await _start(request, headers)
    if isinstance(started, Response):
        return started
    fmt = started.speech.response_format
    captions = _captions(encoded(started.resolved, started.first, started.pieces))
    if started.speech.stream:
        lines = _captioned_lines(captions, fmt)
        config = started.service.config
        return TimedStream(
            lines,
            "application/x-ndjson",
            started.service.metrics,
            config.send_timeout_s,
            headers,
            started.release,
        )
    try:
        audio, stamps = await _until_disconnect(request, _gather(captions))
    except ClientLeft:
        return Response(status_code=499)  # nobody reads it; the work behind it is already released
    finally:
        started.release()
    body = {"audio": base64.b64encode(bytes(audio)).decode(), "audio_format": fmt}
    return JSONResponse({**body, "timestamps": stamps}, headers=headers)


class ClientLeft(Exception):
    """The caller closed the connection before its whole answer was ready."""


async def _gather(
    captions: AsyncGenerator[tuple[bytes, list[dict[str, Any]]]],
) -> tuple[bytearray, list[dict[str, Any]]]:
    audio, stamps = bytearray(), []
    async with aclosing(captions) as each:
        async for data, words in each:
            audio += data
            stamps += words
    return audio, stamps


async def _until_disconnect[T](request: Request, work: Awaitable[T]) -> T:
    """``work``, cancelled the moment the client disconnects: an answer sent whole is made before anything
    is written, so no failed send would ever tell that nobody waits for it (three abandoned 10k-character
    requests kept both cores busy for 9.5 minutes)."""
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


async def voices(request: Request) -> Response:
    headers = _request_id(request)
    service = service_of(request)
    if not authorized(request, service):
        return error_response(UNAUTHORIZED, headers)
    if service is None:
        return error_response(ProtocolError(ErrorCode.NOT_READY, "the server is starting"), headers)
    g2p = service.engine.g2p
    listed = [
        {
            "id": v.name,
            "name": v.name,
            "language": v.lang,
            "language_name": v.language,
            "gender": v.gender,
            "installed": g2p.installed(v.lang),
        }
        for v in service.engine.voices()
    ]
    language_packs = [
        {"pack": s.pack, "installed": s.installed, "install": f"pip install 'streamvoice[{s.pack}]'"}
        for s in (pack_status(p) for p in LANGUAGE_PACKS)
    ]
    body = {"voices": listed, "language_packs": language_packs, "openai_aliases": OPENAI_VOICES}
    return JSONResponse(body, headers=headers)


async def models(request: Request) -> Response:
    headers = _request_id(request)
    if not authorized(request, service_of(request)):
        return error_response(UNAUTHORIZED, headers)
    data = [{"id": m, "object": "model", "created": CREATED, "owned_by": "streamvoice"} for m in MODELS]
    return JSONResponse({"object": "list", "data": data}, headers=headers)


ROUTES = [
    Route("/v1/audio/speech", speech, methods=["POST"]),
    Route("/v1/audio/voices", voices, methods=["GET"]),
    Route("/v1/models", models, methods=["GET"]),
    Route("/dev/captioned_speech", captioned_speech, methods=["POST"]),
]


# --- bodies ---------------------------------------------------------------------------------------------


class SampleCount:
    """Counts the samples passing through, for ``usage`` once the stream is done."""

    def __init__(self) -> None:
        self.value = 0

    async def count(self, items: AsyncGenerator[Item]) -> AsyncGenerator[Item]:
        async with aclosing(items):
            async for item in items:
                if not isinstance(item, Words):
                    self.value += item.size
                yield item


def _failure(exc: ProtocolError) -> dict[str, Any]:
    return {"message": exc.message, "type": "server_error", "param": None, "code": str(exc.code)}


async def _speech_sse(
    chunks: AsyncGenerator[bytes | Words], done_usage: Callable[[], dict[str, int]]
) -> AsyncGenerator[bytes]:
    """OpenAI's SSE: a delta per encoded chunk, then done with usage; a failure after the headers is an
    ``error`` event (the status is long sent) rather than a silently short stream."""
    try:
        async with aclosing(chunks):
            async for data in chunks:
                if isinstance(data, bytes):
                    yield sse_event(
                        {"type": "speech.audio.delta", "audio": base64.b64encode(data).decode("ascii")}
                    )
    except ProtocolError as exc:
        yield sse_event({"type": "error", "error": _failure(exc)})
        return
    yield sse_event({"type": "speech.audio.done", "usage": done_usage()})


async def _captions(
    chunks: AsyncGenerator[bytes | Words],
) -> AsyncGenerator[tuple[bytes, list[dict[str, Any]]]]:
    """Each encoded chunk with the words (Kokoro-FastAPI's shape, seconds) of the piece it begins."""
    pending: list[dict[str, Any]] = []
    async with aclosing(chunks):
        async for data in chunks:
            if isinstance(data, Words):
                pending += [
                    {
                        "word": w.word,
                        "start_time": round(w.start_ms / 1000, 3),
                        "end_time": round(w.end_ms / 1000, 3),
                    }
                    for w in data.times
                ]
                continue
            yield data, pending
            pending = []


async def _captioned_lines(
    captions: AsyncGenerator[tuple[bytes, list[dict[str, Any]]]], fmt: str
) -> AsyncGenerator[bytes]:
    async with aclosing(captions):
        async for data, words in captions:
            line = {"audio": base64.b64encode(data).decode("ascii"), "audio_format": fmt, "timestamps": words}
            yield (json.dumps(line) + "\n").encode()
