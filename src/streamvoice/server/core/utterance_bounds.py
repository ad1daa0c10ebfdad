"""What one utterance may hold, the same on every surface: streamed characters, seconds without text, and
silence against speech."""

from __future__ import annotations

from dataclasses import dataclass

from streamvoice.engine.planning import Piece
from streamvoice.protocol import ErrorCode, Pauses, ProtocolError
from streamvoice.text.pronounce import MAX_SILENCE_MS


@dataclass(frozen=True)
class StreamBounds:
    """What one utterance may hold: a streamed one's characters in all and seconds without text; a whole
    message's characters as spoken (after its lexicons and dictionaries: an alias may grow a text past
    what the wire's check of the written text allowed)."""

    max_chars: int
    idle_end_s: float
    max_text_chars: int = 10_000

    def appended(self, chars: int, more: int, uid: str | None) -> ProtocolError | None:
        """Why a stream holding ``chars`` cannot take ``more``, if it cannot: what came before is spoken."""
        if chars + more <= self.max_chars:
            return None
        return ProtocolError(
            ErrorCode.TEXT_TOO_LONG,
            f"this stream passed {self.max_chars} characters: what came before is spoken and it is ended; "
            "send the rest as a new one",
            uid,
        )

    def spoken(self, chars: int, whole: bool, uid: str | None) -> ProtocolError | None:
        """Why ``chars`` as spoken are too many, if they are: the lexicons made the text longer than what was
        written, bounded as the spoken text (a whole message by the text limit, a stream by its own: an alias
        of 128 characters for "a" once spoke ~64x the limit)."""
        limit = self.max_text_chars if whole else self.max_chars
        if chars <= limit:
            return None
        return ProtocolError(
            ErrorCode.TEXT_TOO_LONG,
            f"with its lexicon and pronunciation dictionaries this text says {chars} characters, past the "
            f"{limit} one {'message' if whole else 'stream'} may: send less, or shorter aliases",
            uid,
        )


MS_PER_TOKEN = 70  # Kokoro speaks ~14 phoneme tokens per second at speed 1.0: an estimate, before decoding


@dataclass
class Silence:
    """The silence an utterance asks for (breaks and the pauses its punctuation calls for) against its
    speech. Past ``MAX_SILENCE_MS`` and more than the speech, the rest is refused: a message of "a." or
    breaks repeated would otherwise hold a listener slot for most of an hour of silence."""

    silence_ms: int = 0
    speech_ms: int = 0

    def add(self, piece: Piece, pauses: Pauses) -> None:
        self.silence_ms += piece.pause_ms if piece.pause_ms is not None else pauses.after(piece.pause)
        self.speech_ms += len(piece.tokens) * MS_PER_TOKEN
        if self.silence_ms > MAX_SILENCE_MS and self.silence_ms > self.speech_ms:
            raise ProtocolError(
                ErrorCode.INVALID_FIELD,
                f"this message asks for more than {MAX_SILENCE_MS // 1000} s of pauses and breaks, more than "
                "its speech; send less punctuation or fewer breaks, or several messages",
            )
