"""One synthesize message on the session protocol: its lifecycle (an explicit table of moves) and its
answer (the utterance's events as ``synthesis_started``, ``alignment``, audio frames, then exactly one
``synthesis_complete`` or ``error``); and the other items of the session's ordered outbox (a reply, the
session's closing, a drain check)."""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Protocol

from streamvoice.audio.output import AudioOutput
from streamvoice.engine.alignment import as_json
from streamvoice.protocol import (
    Alignment,
    ErrorCode,
    ErrorEvent,
    ProtocolError,
    ServerEvent,
    SynthesisComplete,
    SynthesisStarted,
    encode_event,
)
from streamvoice.server.metrics import Metrics
from streamvoice.server.piece_audio import Words
from streamvoice.server.requests import ResolvedRequest, estimated_speech_s
from streamvoice.server.utterance import Completed, Failed, PieceEnded, PieceStarted, Utterance
from streamvoice.server.ws_output import WebSocketOutput


class JobState(enum.Enum):
    QUEUED = "queued"  # accepted; planning and synthesis may already run
    STARTED = "started"  # synthesis_started sent
    STREAMING = "streaming"  # audio sent
    DONE = "done"  # synthesis_complete sent
    FAILED = "failed"  # error sent
    CANCELLED = "cancelled"  # cancel or disconnect; answered ``cancelled`` if the client is still there


# The only moves a message makes; every change of state goes through ``Message.advance``.
TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.QUEUED: frozenset({JobState.STARTED, JobState.FAILED, JobState.CANCELLED}),
    JobState.STARTED: frozenset({JobState.STREAMING, JobState.DONE, JobState.FAILED, JobState.CANCELLED}),
    JobState.STREAMING: frozenset({JobState.DONE, JobState.FAILED, JobState.CANCELLED}),
}


@dataclass(eq=False)
class Message:
    """One synthesize message: its place in the session's order, its answer's state, its utterance."""

    sequence: int
    id: str | None
    request: ResolvedRequest
    received_at: float
    utterance: Utterance
    state: JobState = JobState.QUEUED
    answered: asyncio.Event = field(default_factory=asyncio.Event)
    first_audio_at: float | None = None  # monotonic

    @property
    def cancelled(self) -> bool:
        return self.state is JobState.CANCELLED

    def advance(self, to: JobState) -> bool:
        """Move to ``to`` if that is a legal move from here; a finished message never changes again."""
        if to not in TRANSITIONS.get(self.state, frozenset()):
            return False
        self.state = to
        if to in (JobState.FAILED, JobState.CANCELLED):  # stop whatever still works for this message
            self.utterance.cancel()
        return True


def refusal(draining: bool, open_messages: int, limit: int, msg_id: str | None) -> ProtocolError | None:
    """Why a session takes no more messages now (shutting down, or its queue is full), if it does not."""
    if draining:
        why = "the server is shutting down; send this message again on a new session"
        return ProtocolError(ErrorCode.GOING_AWAY, why, msg_id)
    if open_messages >= limit:
        why = (
            f"{open_messages} messages are already waiting in this session (limit {limit}); "
            "wait for a synthesis_complete and resend"
        )
        return ProtocolError(ErrorCode.QUEUE_FULL, why, msg_id)
    return None


class Holds(Protocol):
    @property
    def chars(self) -> int: ...


class Queued(Protocol):
    """An answer queued on a listener's lane: a session's message, a vendor connection's context."""

    @property
    def request(self) -> ResolvedRequest: ...

    @property
    def utterance(self) -> Holds: ...

    @property
    def first_audio_at(self) -> float | None: ...


def speech_ends(jobs: Sequence[Queued], play_end: float, now: float) -> float:
    """When (monotonic) the audio of these queued messages will have played: what is decoded (``play_end``)
    or, if later, an estimate of all of it, less what the one being spoken has already said. Estimated from
    the text each utterance holds (streamed text as it arrived), never the request's: the vendor sockets'
    requests carry no text, so every context counted 0 s."""
    left = sum(estimated_speech_s(job.utterance.chars, job.request.speed) for job in jobs)
    if jobs and jobs[0].first_audio_at is not None:
        left -= now - jobs[0].first_audio_at
    return now + max(left, play_end - now, 0.0)


async def answer(job: Message, out: WebSocketOutput, metrics: Metrics, model_rate: int) -> None:
    """Send one message's answer: its audio then ``synthesis_complete``, or exactly one ``error``."""

    async def event(e: ServerEvent) -> None:
        await out.send(encode_event(e))

    async def error(code: ErrorCode | str, message: str) -> None:
        metrics.count_error(str(code))
        await event(ErrorEvent(str(code), message, job.id, job.sequence))

    request = job.request
    output = AudioOutput(request.format, request.sample_rate)
    sent = 0
    async with aclosing(job.utterance.events()) as events:
        async for item in events:
            match item:
                case PieceStarted():
                    if job.advance(JobState.STARTED):
                        await event(
                            SynthesisStarted(job.id, job.sequence, request.format, request.sample_rate)
                        )
                case Words(times=times):
                    if times:
                        await event(Alignment(job.id, job.sequence, as_json(times)))
                case PieceEnded():
                    pass
                case Completed(samples=samples, pieces=pieces):
                    if job.state is not JobState.QUEUED:
                        sent += await out.audio(output.flush(), 0)
                    if job.advance(JobState.DONE):
                        audio_ms = round(samples * 1000 / model_rate, 1)
                        await event(SynthesisComplete(job.id, job.sequence, audio_ms, sent, pieces))
                case Failed(error=failure):
                    if job.cancelled or failure.code == ErrorCode.CANCELLED:
                        job.advance(JobState.CANCELLED)
                        await error(ErrorCode.CANCELLED, failure.message)
                    elif job.advance(JobState.FAILED):
                        await error(failure.code, failure.message)
                case _:
                    data = output.encode(item)
                    if data and job.advance(JobState.STREAMING):
                        job.first_audio_at = time.monotonic()
                        metrics.observe_first_audio(job.first_audio_at - job.received_at)
                    sent += await out.audio(data, item.size)


# -- what the session's writer sends besides answers, in order -------------------------------------------


@dataclass(frozen=True)
class Reply:
    event: ServerEvent


@dataclass(frozen=True)
class Closing:
    code: int = 1000
    reason: str = ""
    event: ServerEvent | None = None


@dataclass(frozen=True)
class DrainCheck:
    """Queued when a drain begins: the writer ends the session once nothing is queued behind it."""


def closing(code: ErrorCode, reason: str, message: str, close_code: int = 1000) -> Closing:
    """The session ends with this error told, then this close code and reason."""
    return Closing(close_code, reason, ErrorEvent(code, message))


def going_away() -> Closing:
    message = "the server is shutting down; reconnect to go on"
    return closing(ErrorCode.GOING_AWAY, "server shutting down", message, 1001)
