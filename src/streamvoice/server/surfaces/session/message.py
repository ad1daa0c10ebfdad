"""One synthesize message on the session protocol: its lifecycle (an explicit table of moves), why a session
takes no more, and how its answer is rendered (``synthesis_started``, ``alignment``, audio frames, then exactly
one ``synthesis_complete`` or ``error``). Checked by ``pytest tests/test_session_message.py``."""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field

from streamvoice.engine.alignment import WordTime, as_json
from streamvoice.protocol import (
    Alignment,
    ErrorCode,
    ErrorEvent,
    ProtocolError,
    SynthesisComplete,
    SynthesisStarted,
    encode_event,
)
from streamvoice.server.core.events import Completed
from streamvoice.server.surfaces.answer import Answer
from streamvoice.server.surfaces.playout import Cut
from streamvoice.server.surfaces.websocket import audio_frames

Frame = str | bytes


class MessageState(enum.Enum):
    QUEUED = "queued"  # accepted; planning and synthesis may already run
    STARTED = "started"  # synthesis_started sent
    STREAMING = "streaming"  # audio sent
    DONE = "done"  # synthesis_complete sent
    FAILED = "failed"  # error sent
    CANCELLED = "cancelled"  # cancel or disconnect; answered ``cancelled`` if the client is still there


# The only moves a message makes; every change of state goes through ``Message.advance``.
TRANSITIONS: dict[MessageState, frozenset[MessageState]] = {
    MessageState.QUEUED: frozenset({MessageState.STARTED, MessageState.FAILED, MessageState.CANCELLED}),
    MessageState.STARTED: frozenset(
        {MessageState.STREAMING, MessageState.DONE, MessageState.FAILED, MessageState.CANCELLED}
    ),
    MessageState.STREAMING: frozenset({MessageState.DONE, MessageState.FAILED, MessageState.CANCELLED}),
}


@dataclass(eq=False)
class Message(Answer):
    """One synthesize message: its place in the session's order, its answer's state."""

    sequence: int = field(default=0, kw_only=True)
    state: MessageState = field(default=MessageState.QUEUED, kw_only=True)
    answered: asyncio.Event = field(default_factory=asyncio.Event, kw_only=True)
    sent_bytes: int = field(default=0, kw_only=True)

    @property
    def cancelled(self) -> bool:
        return self.state is MessageState.CANCELLED

    def advance(self, to: MessageState) -> bool:
        """Move to ``to`` if that is a legal move from here; a finished message never changes again."""
        if to not in TRANSITIONS.get(self.state, frozenset()):
            return False
        self.state = to
        if to in (MessageState.FAILED, MessageState.CANCELLED):  # stop whatever still works for this message
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


# -- a message's answer, as frames ------------------------------------------------------------------------


def started(message: Message) -> list[Frame]:
    if not message.advance(MessageState.STARTED):
        return []
    request = message.request
    return [encode_event(SynthesisStarted(message.id, message.sequence, request.format, request.sample_rate))]


def words(message: Message, times: list[WordTime]) -> list[Frame]:
    return [encode_event(Alignment(message.id, message.sequence, as_json(times)))] if times else []


def audio(message: Message, data: bytes) -> list[Frame]:
    if message.state is MessageState.QUEUED:
        return []  # nothing before synthesis_started (a tail after a failure)
    message.advance(MessageState.STREAMING)
    message.sent_bytes += len(data)
    return list(audio_frames(data))


def completed(message: Message, done: Completed, model_rate: int) -> list[Frame]:
    if not message.advance(MessageState.DONE):
        return []
    audio_ms = round(done.samples * 1000 / model_rate, 1)
    return [
        encode_event(
            SynthesisComplete(message.id, message.sequence, audio_ms, message.sent_bytes, done.pieces)
        )
    ]


def failed(message: Message, error: ProtocolError) -> tuple[list[Frame], ProtocolError | None]:
    """The message's one error, and the error to count (None when it was already answered)."""
    if message.cancelled or error.code == ErrorCode.CANCELLED:
        message.advance(MessageState.CANCELLED)
        told = ProtocolError(ErrorCode.CANCELLED, error.message)
    elif message.advance(MessageState.FAILED):
        told = error
    else:
        return [], None
    return [encode_event(ErrorEvent(str(told.code), told.message, message.id, message.sequence))], told


def heard(cut: Cut[Message]) -> list[dict[str, object]]:
    """Each message the cut stopped: how much of its audio was played, what of its text was heard and not."""
    return [
        {"id": answer.id, "played_ms": what.played_ms, "heard": what.heard, "unheard": what.unheard}
        for answer, what in cut.heard
    ]
