"""Which of a text's words a listener heard, from the words' times and how far its player got: the one rule
behind every "what was heard" (the speech server's cut, the agent's history).

A word cut in the middle was heard when at least half of its sound was played (its midpoint): Whisper hears
a word cut past its middle and misses one cut before it, on most words (``tests/test_heard_audio.py``). The
split is made on the caller's text as written ("$4.50", "14h30"), never a normalised form: the word times
carry the written words. Checked by ``pytest tests/test_heard.py``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

# How far past the last word found the next one is looked for: the words come in order, with spaces,
# punctuation or a written form the model said differently ("$4.50") between them.
LOOKAHEAD_CHARS = 96


class Timed(Protocol):
    """A word and when it is said, in ms from the first sample of its answer."""

    @property
    def word(self) -> str: ...

    @property
    def start_ms(self) -> float: ...

    @property
    def end_ms(self) -> float: ...


def heard_words(words: Sequence[Timed], played_ms: float) -> int:
    """How many of the words (in speaking order) were heard: those at least half played."""
    count = 0
    for word in words:
        if (word.start_ms + word.end_ms) / 2 > played_ms:
            break
        count += 1
    return count


def split_written(written: str, words: Sequence[Timed], played_ms: float) -> tuple[str, str]:
    """The text cut right after the last word heard: (heard, unheard), exact, so ``heard + unheard ==
    written`` character for character (the space after the cut begins the unheard part; a caller that
    resends the unheard part as it is loses nothing). A word that is not in the text as written (a form the
    model said differently) moves the cut no further."""
    cut = 0
    at = 0
    for word in words[: heard_words(words, played_ms)]:
        found = _find(written, word.word, at)
        if found is not None:
            at = cut = found
    return written[:cut], written[cut:]


def _find(text: str, word: str, start: int) -> int | None:
    """Where ``word`` ends in ``text`` after ``start``: as a whole token first (a short word is inside many
    longer ones), else anywhere (Japanese and Chinese have no spaces)."""
    window = text[start : start + len(word) + LOOKAHEAD_CHARS]
    whole = re.search(rf"(?<!\S){re.escape(word)}", window)
    if whole is not None:
        return start + whole.end()
    found = window.find(word)
    return None if found < 0 else start + found + len(word)
