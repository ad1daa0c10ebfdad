"""One answer on a connection (a session's message, a vendor's context, a Wyoming utterance) and what a wire
supplies to render it: the utterance's events (``rendering.encoded_events``) in, the wire's frames out. The
connection runtime (``connection``) calls these in speaking order; a wire overrides what it sends.
Checked by every wire's tests."""

from __future__ import annotations

from dataclasses import dataclass

from streamvoice.engine.alignment import WordTime
from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.events import Completed, Failed, Marked, PieceEnded, PieceStarted
from streamvoice.server.core.piece_audio import Words
from streamvoice.server.core.requests import ResolvedRequest
from streamvoice.server.core.utterance import Utterance


@dataclass(eq=False)
class Answer:
    """One answer on a connection: its id on the wire, its request, its utterance."""

    id: str | None
    request: ResolvedRequest
    utterance: Utterance
    opened_at: float  # monotonic
    first_audio_at: float | None = None
    sent_samples: int = 0  # at the model's rate, in the frames rendered so far
    starts_at: int | None = (
        None  # where its first audio sits on the connection's timeline (``heard.Timeline``)
    )


class Renderer[F, A: Answer]:
    """Events in, the wire's frames out: the one hook vocabulary every wire speaks (``F``: text or bytes on a
    WebSocket, events on Wyoming; ``A``: the wire's answer, with its typed per-answer state)."""

    def render(
        self, answer: A, event: PieceStarted | Words | PieceEnded | Marked | Completed | Failed
    ) -> list[F]:
        """Any event but audio (which the runtime paces first: ``render_audio``) as the wire's frames."""
        match event:
            case PieceStarted(index=index):
                return self.render_started(answer, index)
            case Words(times=times):
                return self.render_words(answer, times)
            case PieceEnded(index=index):
                return self.render_piece_ended(answer, index)
            case Marked(label=label):
                return self.render_marked(answer, label)
            case Completed():
                return self.render_completed(answer, event)
            case Failed(error=error) if error.code == ErrorCode.CANCELLED:
                return self.render_cancelled(answer, error)
            case Failed(error=error):
                return self.render_failed(answer, error)

    def render_started(self, answer: A, index: int) -> list[F]:
        return []

    def render_words(self, answer: A, times: list[WordTime]) -> list[F]:
        return []

    def render_audio(self, answer: A, data: bytes, samples: int) -> list[F]:
        """``data`` encoded, covering ``samples`` at the model's rate after ``answer.sent_samples``."""
        raise NotImplementedError

    def render_piece_ended(self, answer: A, index: int) -> list[F]:
        return []

    def render_marked(self, answer: A, label: int) -> list[F]:
        """Every piece before the caller's mark has been sent (``Utterance.mark``)."""
        return []

    def render_completed(self, answer: A, done: Completed) -> list[F]:
        return []

    def render_cancelled(self, answer: A, error: ProtocolError) -> list[F]:
        """The caller (or a cut) cancelled it (``error`` is ``cancelled``, named): by default told as a
        failure; a wire whose clients expect their own cancel to be answered otherwise says so here."""
        return self.render_failed(answer, error)

    def render_failed(self, answer: A, error: ProtocolError) -> list[F]:
        """The answer's one error (nothing speakable, a failed synthesis, shed); the wire counts what it
        reports as an error (``count_error``)."""
        return []
