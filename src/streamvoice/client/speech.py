"""Async client for a bidirectional speech session, plus a small synchronous wrapper.

Uses only the shared protocol: send text, iterate audio and control events, cancel, close. Audio frames
carry no id; they belong to the message whose ``synthesis_started`` came last, which the server
guarantees by never interleaving messages.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from streamvoice.client.transports import Transport, TransportClosed
from streamvoice.protocol import ErrorCode, ProtocolError, decode_control_frame


@dataclass(frozen=True)
class AudioChunk:
    data: bytes
    id: str | None
    received_at: float


@dataclass(frozen=True)
class ControlEvent:
    payload: dict[str, Any]
    received_at: float

    @property
    def type(self) -> str:
        return str(self.payload.get("type", ""))


Event = AudioChunk | ControlEvent


# What ``speak`` raises when the server answers ``error``: the protocol's one error type, by a client name.
SpeechError = ProtocolError


@dataclass
class SynthesisResult:
    id: str | None
    audio: bytes = b""
    complete: dict[str, Any] = field(default_factory=dict)
    sent_at: float = 0.0
    first_audio_at: float | None = None
    done_at: float | None = None
    sample_rate: int | None = None  # as synthesis_started said
    words: list[dict[str, Any]] = field(default_factory=list)  # every alignment frame's words, in order
    arrivals: list[tuple[float, int]] = field(default_factory=list)  # (received at, bytes) per audio frame

    @property
    def time_to_first_audio_s(self) -> float | None:
        return None if self.first_audio_at is None else self.first_audio_at - self.sent_at


class SpeechClient:
    """One session. Use ``async with await SpeechClient.connect(url) as client``."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._ids = itertools.count(1)
        self._current_id: str | None = None
        self._closed = False

    @classmethod
    async def connect(cls, target: str, token: str | None = None) -> SpeechClient:
        """``target``: a local URL (``http://host:8080``, ``ws://...``) or ``sagemaker://ENDPOINT?region=R``."""
        from streamvoice.client.sagemaker import connect_transport

        return cls(await connect_transport(target, token))

    async def __aenter__(self) -> SpeechClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def send(self, payload: dict[str, Any], binary: bool = False) -> None:
        text = json.dumps(payload)
        await self._transport.send(text.encode() if binary else text)

    async def synthesize(
        self,
        text: str,
        *,
        voice: str | None = None,
        speed: float | None = None,
        format: str | None = None,
        sample_rate: int | None = None,
        lang: str | None = None,
        id: str | None = None,
        binary: bool = False,
    ) -> str:
        msg_id = id or f"m{next(self._ids)}"
        payload: dict[str, Any] = {"type": "synthesize", "text": text, "id": msg_id}
        options = (
            ("voice", voice),
            ("speed", speed),
            ("format", format),
            ("sample_rate", sample_rate),
            ("lang", lang),
        )
        for key, value in options:
            if value is not None:
                payload[key] = value
        await self.send(payload, binary)
        return msg_id

    async def configure(self, **options: Any) -> None:
        await self.send({"type": "configure", **options})

    async def cancel(self, id: str | None = None) -> None:
        """Cancel one message by id, or (no id) everything queued or in progress."""
        await self.send({"type": "cancel", "id": id} if id is not None else {"type": "cancel"})

    async def close(self) -> None:
        """Ask the server to finish what is queued, then end the session."""
        if not self._closed:
            await self.send({"type": "close"})

    async def aclose(self) -> None:
        self._closed = True
        await self._transport.close()

    async def events(self) -> AsyncIterator[Event]:
        """Every frame in arrival order until the session ends."""
        while True:
            try:
                frame = await self._transport.recv()
            except TransportClosed:
                return
            now = time.perf_counter()
            control = decode_control_frame(frame)
            if control is None:
                yield AudioChunk(frame if isinstance(frame, bytes) else frame.encode(), self._current_id, now)
                continue
            if control.get("type") == "synthesis_started":
                self._current_id = control.get("id")
            yield ControlEvent(control, now)

    async def speak(self, text: str, **options: Any) -> SynthesisResult:
        """Send one message and collect its audio; raises SpeechError if the server answers with an error."""
        result = SynthesisResult(id=None, sent_at=time.perf_counter())
        result.id = await self.synthesize(text, **options)
        chunks: list[bytes] = []
        async for event in self.events():
            if isinstance(event, AudioChunk):
                if event.id == result.id:
                    if result.first_audio_at is None:
                        result.first_audio_at = event.received_at
                    chunks.append(event.data)
                    result.arrivals.append((event.received_at, len(event.data)))
                continue
            if event.payload.get("id") != result.id:
                continue
            if event.type == "synthesis_started":
                result.sample_rate = event.payload.get("sample_rate")
            elif event.type == "alignment":
                result.words.extend(event.payload.get("words") or [])
            elif event.type == "synthesis_complete":
                result.complete = event.payload
                result.done_at = event.received_at
                result.audio = b"".join(chunks)
                return result
            if event.type == "error":
                raise SpeechError(
                    str(event.payload.get("code")), str(event.payload.get("message")), result.id
                )
        raise SpeechError(ErrorCode.CLOSED, "the session ended before the message was answered", result.id)


def speak(url: str, text: str, token: str | None = None, **options: Any) -> SynthesisResult:
    """Synchronous one-shot: open a session, synthesise, close."""

    async def run() -> SynthesisResult:
        client = await SpeechClient.connect(url, token)
        async with client:
            return await client.speak(text, **options)

    return asyncio.run(run())
