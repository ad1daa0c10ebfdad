"""ElevenLabs' character alignment: each character's start and duration, per socket message (relative to
that message, filled to its end, a word never split across messages) or for a whole HTTP answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamvoice.engine.alignment import WordTime


@dataclass(frozen=True)
class Char:
    char: str
    start_ms: float
    end_ms: float


def characters(times: list[WordTime], leading_space: bool) -> list[Char]:
    """Words as characters: each word's span shared by its letters, a space between words filling the gap
    (ElevenLabs' alignment is per character, spaces included)."""
    chars: list[Char] = []
    previous_end: float | None = None
    for i, w in enumerate(times):
        if i > 0 or leading_space:
            gap_start = previous_end if previous_end is not None else w.start_ms
            chars.append(Char(" ", gap_start, max(gap_start, w.start_ms)))
        step = (w.end_ms - w.start_ms) / max(len(w.word), 1)
        chars += [Char(c, w.start_ms + k * step, w.start_ms + (k + 1) * step) for k, c in enumerate(w.word)]
        previous_end = w.end_ms
    return chars


class Spelled:
    """One answer's words as characters, piece by piece: a space before every piece's words but the first
    said (the socket per context, the HTTP routes per answer)."""

    def __init__(self) -> None:
        self.said = False

    def __call__(self, times: list[WordTime]) -> list[Char]:
        chars = characters(times, self.said)
        self.said = self.said or bool(times)
        return chars


def message_chars(pending: list[Char], end_ms: float, inside_word: bool) -> tuple[list[Char], list[Char]]:
    """The characters a message ending at ``end_ms`` carries, and those left for later messages.

    Those that start before its end; and where none does inside a word (a message shorter than one of its
    letters), the next letter, placed at the message's end: a message without characters gets a space as
    its filler, and a space inside a word splits it in two for the clients that build words from
    characters (Pipecat read "morning." as "morni" and "ng."). Between words the filler space is right.
    """
    count = sum(1 for c in pending if c.start_ms < end_ms)
    if count == 0 and pending and inside_word and pending[0].char != " ":
        count = 1
    return pending[:count], pending[count:]


def ws_alignment(chars: list[Char], offset_ms: float, end_ms: float) -> dict[str, list[Any]]:
    """The characters that start in a message spanning [``offset_ms``, ``end_ms``) of the answer, relative
    to its start. Their spans are clipped to the message and a space fills the rest, so the last start plus
    its duration is the message's own length: a client that adds each message's span to its clock (as the
    wire's rule implies) stays in step with the audio. Whole milliseconds from the answer's start are
    rounded once, so the clock does not drift over many messages."""
    first, last = round(offset_ms), round(end_ms)
    names: list[str] = []
    starts: list[int] = []
    durations: list[int] = []
    for c in chars:
        start = min(max(round(c.start_ms), first), last)
        end = min(max(round(c.end_ms), start), last)
        names.append(c.char)
        starts.append(start - first)
        durations.append(end - start)
    reached = first + (starts[-1] + durations[-1] if names else 0)
    if reached < last or not names:
        names.append(" ")
        starts.append(reached - first)
        durations.append(last - reached)
    return {"chars": names, "charStartTimesMs": starts, "charDurationsMs": durations}


def http_alignment(chars: list[Char]) -> dict[str, list[Any]]:
    return {
        "characters": [c.char for c in chars],
        "character_start_times_seconds": [round(c.start_ms / 1000, 3) for c in chars],
        "character_end_times_seconds": [round(c.end_ms / 1000, 3) for c in chars],
    }
