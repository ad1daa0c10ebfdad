"""What a turn tells its caller, as typed events: the one vocabulary of the agent's SSE, its WebSocket and the
AgentCore entry point (each a JSON object with a ``type``; audio is bytes here, base64 in SSE's text, a binary
frame on the WebSocket). ``docs/agent.md`` lists them for callers; ``mypy`` checks every producer and reader
against these shapes, and ``pytest tests/test_agent.py`` reads them off the wire."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from streamvoice.protocol import SAMPLE_RATE

# A turn's audio is what the agent asks the speech server for: 16-bit mono PCM at the model's rate.
AUDIO_FORMAT = "pcm"
PCM_BYTES_PER_MS = SAMPLE_RATE * 2 / 1000


def pcm_ms(nbytes: int) -> float:
    """Milliseconds of the turn's audio in ``nbytes``."""
    return nbytes / PCM_BYTES_PER_MS


class Stamped(TypedDict, total=False):
    """Every event of a turn carries ``t_ms``, milliseconds since its ``agent_start`` (set as it is emitted)."""

    t_ms: float


class AgentStart(Stamped):
    type: Literal["agent_start"]
    mode: str
    model: str


class TextDelta(Stamped):
    type: Literal["text_delta"]
    text: str


class SpeechPiece(Stamped):
    """A piece of the answer that went to speech (sent by the agent, or cut by the server)."""

    type: Literal["speech_piece"]
    index: int
    text: str


class AudioStart(Stamped):
    type: Literal["audio_start"]
    format: str
    sample_rate: int


class AudioChunk(Stamped):
    type: Literal["audio_chunk"]
    seq: int
    data: bytes  # a binary frame on the WebSocket, base64 text in SSE (``app.to_sse_payload``)


class TimedWord(TypedDict):
    word: str | None
    start_ms: float
    end_ms: float


class Alignment(Stamped):
    """Word times counted from the turn's first audio sample."""

    type: Literal["alignment"]
    words: list[TimedWord]


class AudioEnd(Stamped):
    type: Literal["audio_end"]
    chunks: int
    bytes: int


class AgentEnd(Stamped):
    type: Literal["agent_end"]
    text: str
    pieces: int
    audio_bytes: int
    time_to_first_audio_ms: float | None


class Failure(Stamped):
    """The turn's one error (it ends the turn's events)."""

    type: Literal["error"]
    code: str
    message: str


class HeardPart(TypedDict):
    played_ms: float
    heard: str
    unheard: str


class ConversationOpened(TypedDict):
    """First of a turn: its conversation, and what was heard of the answer this prompt interrupted."""

    type: Literal["conversation"]
    id: str
    interrupted: NotRequired[HeardPart]


class Interrupted(HeardPart):
    """An answer stopped by the caller: what of it was heard."""

    type: Literal["interrupted"]
    conversation: NotRequired[str | None]


TurnEvent = (
    AgentStart | TextDelta | SpeechPiece | AudioStart | AudioChunk | Alignment | AudioEnd | AgentEnd | Failure
)
Event = TurnEvent | ConversationOpened | Interrupted
