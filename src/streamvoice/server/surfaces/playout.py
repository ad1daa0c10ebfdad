"""Where each answer sits on a connection's playout and what a cut stopped: the account a barge-in is answered
from (``Connection.cut``). The connection records what it sends (``sent``) and what ends (``finished``); a cut
says, for every answer whose audio it stopped, what the listener heard of it.
Checked by ``pytest tests/test_heard_audio.py tests/test_connection.py``."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.heard import Heard, Timeline, played_of
from streamvoice.server.surfaces.answer import Answer

# Finished answers remembered for a cut: their audio may still be playing (sent ahead of the player).
RECENT_ANSWERS = 8


@dataclass(frozen=True)
class Cut[A: Answer]:
    """A barge-in's account: where the listener's player was on the connection's timeline, the answers
    cancelled, and what was heard of each answer whose audio the cut stopped (in speaking order)."""

    played_ms: float
    cancelled: list[A]
    heard: list[tuple[A, Heard]]


class Playout[A: Answer]:
    """The connection's audio as the listener's player counts it (``timeline``), and the answers recently
    finished whose audio may still be playing."""

    def __init__(self, sample_rate: int) -> None:
        self.timeline = Timeline(sample_rate)
        self._recent: deque[A] = deque(maxlen=RECENT_ANSWERS)

    def sent(self, answer: A, samples: int) -> None:
        """``samples`` more of ``answer``'s audio went to the listener."""
        if answer.starts_at is None:
            answer.starts_at = self.timeline.samples
        self.timeline.samples += samples
        answer.sent_samples += samples

    def finished(self, answer: A) -> None:
        if answer.starts_at is not None and not answer.utterance.cancelled:
            self._recent.append(answer)

    def cut(
        self,
        target: str | None,
        played_ms: float | None,
        unplayed_s: float,
        cancel: Callable[[str | None], list[A]],
    ) -> Cut[A]:
        """``cancel(target)``, and what the listener heard of each answer the cut stops: those cancelled and,
        on a barge-in (no ``target``), finished ones whose audio was still playing. ``played_ms``: where the
        caller's player is (None: ``unplayed_s``, the server's playout clock, says); a position before the
        last cut's is ``invalid_field`` and nothing is cancelled."""
        timeline = self.timeline
        if played_ms is not None and played_ms < timeline.ms(timeline.floor):
            raise ProtocolError(
                ErrorCode.INVALID_FIELD,
                f"played_ms {played_ms:g} is before {timeline.ms(timeline.floor):g}, where the last cancel left "
                "the player; count the audio played since the session began, without what a cancel dropped",
                param="played_ms",
            )
        position = timeline.position(played_ms, unplayed_s)
        playing = [
            a
            for a in self._recent
            if target is None
            and a.starts_at is not None
            and played_of(a.starts_at, a.sent_samples, position) < a.sent_samples
        ]
        for answer in playing:
            self._recent.remove(answer)  # what it had past the cut is dropped: never cut twice
        cancelled = cancel(target)
        heard: list[tuple[A, Heard]] = []
        dropped = 0
        for answer in [*playing, *cancelled]:
            played = played_of(answer.starts_at, answer.sent_samples, position)
            dropped += answer.sent_samples - played
            heard.append((answer, answer.utterance.heard(timeline.ms(played))))
        timeline.cut(position, dropped)
        return Cut(timeline.ms(position), cancelled, heard)
