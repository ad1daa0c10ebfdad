"""Word error rate: how a listener (speech-to-text) compares two renditions of the same text.

Kokoro's decoder adds noise, so two syntheses of one text never match sample for sample; what must hold is
that a listener hears the same words.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"(?:[^\W_]|')+")  # letters of any script, digits, apostrophes: "pequeño" is one word
_NUMBERS = {
    "0": "zero",
    "1": "one",
    "2": "two",
    "3": "three",
    "4": "four",
    "5": "five",
    "6": "six",
    "7": "seven",
    "8": "eight",
    "9": "nine",
    "10": "ten",
}


def words(text: str) -> list[str]:
    return [_NUMBERS.get(w, w) for w in _WORD.findall(text.lower().replace("-", " "))]


def word_error_rate(reference: str, hypothesis: str) -> float:
    return _edit_rate(words(reference), words(hypothesis))


def characters(text: str) -> list[str]:
    """Letters and digits only, case folded: scripts without spaces (Japanese, Chinese) are compared by
    character, and punctuation or spacing Whisper adds or drops is not an error."""
    import unicodedata

    folded = unicodedata.normalize("NFKC", text).casefold()
    return [ch for ch in folded if ch.isalnum()]


def character_error_rate(reference: str, hypothesis: str) -> float:
    """Edits per reference character (more errors than characters reads above 1)."""
    return _edit_rate(characters(reference), characters(hypothesis))


def _edit_rate(ref: list[str], hyp: list[str]) -> float:
    if not ref:
        return 0.0 if not hyp else 1.0
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1] / len(ref)
