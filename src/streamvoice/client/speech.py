"""Async client for a bidirectional speech session, plus a small synchronous wrapper.

Uses only the shared protocol: send text, iterate audio and control events, cancel, close. Audio frames
carry no id; they belong to the message whose ``synthesis_started`` came last, which the server
guarantees by never interleaving messages.

A client made by ``connect`` outlives its server (``client/resilience.py``): when the replica drains,
drops or refuses the session, ``events()`` opens a new session on the same URL, replays the session's
``configure`` messages, re-sends every message not yet answered (same ids), and yields one
``{"type": "reconnected", "resent": [...], "restarted": [...]}`` event; ``restarted`` lists messages whose
audio had begun and now starts again from the top.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from streamvoice.client.resilience import REFUSALS, Reconnect, should_reconnect
from streamvoice.client.transports import Transport, TransportClosed
from streamvoice.protocol import ErrorCode, ProtocolError, decode_control_frame

Dial = Callable[[], Awaitable[Transport]]
MAX_REPLAYED_CONFIGURES = 16
DEFAULT_RECONNECT = Reconnect()


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
    """One session (renewed across replicas when made by ``connect``). Use
    ``async with await SpeechClient.connect(url) as client``."""

    def __init__(
        self, transport: Transport, dial: Dial | None = None, reconnect: Reconnect | None = None
    ) -> None:
        self._transport = transport
        self._dial = dial  # how to open another session; None: this transport is the only one
        self._policy = reconnect if dial is not None else None
        self._ids = itertools.count(1)
        self._current_id: str | None = None
        self._closed = False
        self._unanswered: dict[str, str] = {}  # id -> the frame sent, in send order
        self._started: set[str] = set()  # unanswered messages whose audio has begun
        self._configures: list[str] = []  # replayed, in order, on a new session
        self._refused: str | None = None  # why the session was refused or is ending (an error without id)
        self.reconnects = 0
        self._attempts = 0  # reconnects since a session last worked (sent anything but a refusal)
        self._announce: dict[str, Any] | None = None  # the "reconnected" event, once the session works

    @classmethod
    async def connect(
        cls, target: str, token: str | None = None, reconnect: Reconnect | None = DEFAULT_RECONNECT
    ) -> SpeechClient:
        """``target``: a local URL (``http://host:8080``, ``ws://...``) or ``sagemaker://ENDPOINT?region=R``.
        ``reconnect=None`` turns resilience off (the session ends with its server)."""
        from streamvoice.client.sagemaker import connect_transport

        async def dial() -> Transport:
            return await connect_transport(target, token)

        return cls(await dial(), dial, reconnect)

    async def __aenter__(self) -> SpeechClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def send(self, payload: dict[str, Any], binary: bool = False) -> None:
        text = json.dumps(payload)
        kind = payload.get("type", "synthesize" if "text" in payload else None)
        if kind == "synthesize" and isinstance(payload.get("id"), str) and not payload.get("stream"):
            self._unanswered[payload["id"]] = text  # a streamed message's text is not kept: not replayed
        elif kind == "configure":
            self._configures = [*self._configures, text][-MAX_REPLAYED_CONFIGURES:]
        try:
            await self._transport.send(text.encode() if binary else text)
        except TransportClosed:
            if self._policy is None or kind not in ("synthesize", "configure"):
                raise
            # kept: events() re-sends it on the next session

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
        stream: bool = False,
    ) -> str:
        """Send a message; ``stream=True`` opens a streamed one: more text follows with ``append``, then
        ``end`` (the server cuts it into pieces as it arrives: its chunker, its quiet cut)."""
        msg_id = id or f"m{next(self._ids)}"
        payload: dict[str, Any] = {"type": "synthesize", "text": text, "id": msg_id}
        if stream:
            payload["stream"] = True
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

    async def append(self, id: str, text: str) -> None:
        """More text for the streamed message ``id`` (an LLM's tokens as they arrive)."""
        await self.send({"type": "append", "id": id, "text": text})

    async def flush(self, id: str) -> None:
        """Speak what the streamed message ``id`` has buffered now; more text may follow."""
        await self.send({"type": "flush", "id": id})

    async def end(self, id: str) -> None:
        """The streamed message ``id`` has all its text."""
        await self.send({"type": "end", "id": id})

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
        """Every frame in arrival order until the session ends (for good: see the module docstring)."""
        while True:
            try:
                frame = await self._transport.recv()
            except TransportClosed as exc:
                if self._closed or self._policy is None:
                    return
                if not should_reconnect(exc.code, self._refused is not None, len(self._unanswered)):
                    return
                if not await self._reconnect(exc):
                    for failure in self._give_up(exc):
                        yield failure
                    return
                continue
            now = time.perf_counter()
            control = decode_control_frame(frame)
            if control is not None and self._absorbed(control):
                continue
            self._attempts = 0  # this session works: announce it once, if it is a new one
            if self._announce is not None:
                yield ControlEvent(self._announce, now)
                self._announce = None
            if control is None:
                if self._current_id is not None:
                    self._started.add(self._current_id)
                yield AudioChunk(frame if isinstance(frame, bytes) else frame.encode(), self._current_id, now)
                continue
            if control.get("type") == "synthesis_started":
                self._current_id = control.get("id")
            yield ControlEvent(control, now)

    def _absorbed(self, control: dict[str, Any]) -> bool:
        """Track answers; swallow what only says "try another replica" when this client will."""
        kind, msg_id, code = control.get("type"), control.get("id"), control.get("code")
        if kind == "error" and self._policy is not None and code in REFUSALS:
            if msg_id is None:
                self._refused = str(code)  # the session is refused or ending; its close follows
                return True
            if msg_id in self._unanswered and code == ErrorCode.GOING_AWAY:
                return True  # arrived while the replica drains: re-sent on the next session
        if kind in ("synthesis_complete", "error") and isinstance(msg_id, str):
            self._unanswered.pop(msg_id, None)
            self._started.discard(msg_id)
        return False

    async def _reconnect(self, closed: TransportClosed) -> bool:
        """A new session with the old one's configuration and unanswered messages; False: gave up."""
        assert self._policy is not None and self._dial is not None
        while self._attempts < self._policy.attempts:
            attempt, self._attempts = self._attempts, self._attempts + 1
            # A drain hands over at once; a refusal or a drop backs off first.
            first_try_now = (
                attempt == 0 and closed.code == 1001 and self._refused in (None, ErrorCode.GOING_AWAY)
            )
            await asyncio.sleep(self._policy.delay(attempt + (0 if first_try_now else 1)))
            try:
                transport = await self._dial()
            except (OSError, TimeoutError, TransportClosed):
                continue
            try:
                for frame in [*self._configures, *self._unanswered.values()]:
                    await transport.send(frame)
            except TransportClosed:
                continue
            self._transport, self._refused, self._current_id = transport, None, None
            self.reconnects += 1
            restarted = sorted({*self._started, *(self._announce or {}).get("restarted", ())})
            self._started.clear()
            self._announce = {"type": "reconnected", "resent": list(self._unanswered), "restarted": restarted}
            return True
        return False

    def _give_up(self, closed: TransportClosed) -> list[ControlEvent]:
        """One answer for every message still owed one: the server could not be reached again."""
        code = ErrorCode.SERVER_BUSY if self._refused == ErrorCode.SERVER_BUSY else ErrorCode.CLOSED
        attempts = self._policy.attempts if self._policy else 0
        message = (
            f"the speech server went away ({closed.reason or 'closed'}) and {attempts} reconnects failed"
        )
        now = time.perf_counter()
        failures = [
            ControlEvent({"type": "error", "code": str(code), "message": message, "id": msg_id}, now)
            for msg_id in self._unanswered
        ]
        self._unanswered.clear()
        return failures

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
            if event.type == "reconnected" and result.id in event.payload.get("restarted", ()):
                chunks.clear()  # the message starts again from its first sample on the new session
                result.arrivals.clear()
                result.words.clear()
                result.first_audio_at = None
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
