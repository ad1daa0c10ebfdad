"""What a listener heard of an answer cut off mid-speech: the caller's own words up to where its player got,
and the rest, unheard.

An agent that is interrupted must remember only what was said; the rest was never heard ("as I mentioned"
would be wrong). The split is made on the caller's text as written ("$4.50", "14h30", SSML reduced to its
text), never the normalised one, from the word times the model gave before the audio.

The rule for a word cut in the middle, and the split, are ``text.heard``'s (the agent's history uses them
too): a word was heard when at least half of its sound was played.

A connection's audio is one timeline, as the caller's player counts it (``Timeline``): a cut takes back the
audio sent past the point the player reached (the caller drops it), so the next answer's audio follows
straight on from what was played, and each position a caller reports must not go back past the last cut.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamvoice.engine.alignment import WordTime, text_words
from streamvoice.text.heard import split_written


@dataclass(frozen=True)
class Heard:
    """One answer's split at the point its listener's player reached."""

    played_ms: float  # of this answer's audio
    heard: str
    unheard: str


@dataclass
class Transcript:
    """What one utterance was given (as written) and has said (word times from its first sample)."""

    written: str = ""
    words: list[WordTime] = field(default_factory=list)

    def wrote(self, text: str) -> None:
        self.written += text

    def said(self, times: list[WordTime]) -> None:
        self.words.extend(times)

    def said_untimed(self, text: str, start_ms: float, end_ms: float) -> None:
        """A piece the model gave no word times for: its words spread over its audio by their length."""
        words = text_words(text)
        total = sum(len(w) for w in words)
        at = start_ms
        for word in words:
            length = (end_ms - start_ms) * len(word) / total
            self.words.append(WordTime(word, at, at + length))
            at += length

    def split(self, played_ms: float) -> Heard:
        heard, unheard = split_written(self.written, self.words, played_ms)
        return Heard(round(max(played_ms, 0.0), 1), heard, unheard)


@dataclass
class Timeline:
    """A connection's audio as its caller's player counts it, in samples at the model's rate."""

    rate: int
    samples: int = 0  # sent, less what cuts took back
    floor: int = 0  # where the last cut left the player: a reported position may not go back past it

    def ms(self, samples: int) -> float:
        return round(samples * 1000 / self.rate, 1)

    def position(self, played_ms: float | None, unplayed_s: float) -> int:
        """Where the player is: what the caller says it played (at most what was sent), or, when it does not
        say, what was sent less what the server's playout clock says has not played yet."""
        if played_ms is None:
            return max(self.floor, self.samples - round(unplayed_s * self.rate))
        return min(self.samples, round(played_ms * self.rate / 1000))

    def cut(self, position: int, dropped: int) -> None:
        """A cut at ``position``: the ``dropped`` samples sent past it that the caller will not play are taken
        back; the player goes on from here."""
        self.samples = max(position, self.samples - dropped)
        self.floor = max(self.floor, position)


def played_of(start: int | None, sent: int, position: int) -> int:
    """Samples of one answer (its first at ``start`` on the timeline, ``sent`` of them) the player has played."""
    if start is None:
        return 0
    return max(0, min(sent, position - start))
