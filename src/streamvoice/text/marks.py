"""The private marks spans travel in inside a text, so the chunker and the normaliser keep them whole:
``SAY`` (a written form and what to say), ``PHONEMES`` (a written form and its phonemes)."""

from __future__ import annotations

import re
from collections.abc import Callable

SAY, PHONEMES, SEP, END = "\ue000", "\ue003", "\ue001", "\ue002"
SPACE = "\ue004"  # a space inside a span: the chunker never cuts there
# Before what a lexicon entry says: its word matches in the case written only (a dictionary rule's
# ``case_sensitive``); never in a caller's own lexicon (``check_lexicon`` refuses the marks).
EXACT = "\ue005"
MARKS = SAY + PHONEMES + SEP + END + SPACE + EXACT


def say_span(written: str, spoken: str) -> str:
    return f"{SAY}{clean(written)}{SEP}{clean(spoken)}{END}"


def phoneme_span(written: str, phonemes: str) -> str:
    return f"{PHONEMES}{clean(written)}{SEP}{clean(phonemes)}{END}"


def clean(text: str) -> str:
    return " ".join("".join(ch for ch in text if ch not in MARKS).split()).replace(" ", SPACE)


def outside_spans(text: str, change: Callable[[str], str]) -> str:
    parts = re.split(f"([{SAY}{PHONEMES}][^{END}]*{END})", text)
    return "".join(p if p[:1] in (SAY, PHONEMES) else change(p) for p in parts)


_SAID = re.compile(f"{SAY}[^{SEP}{END}]*{SEP}([^{END}]*){END}")


def spoken_length(text: str) -> int:
    """How many characters a text says: a respelling (``SAY``) counts as what it says, not as its written
    word, so an alias that grows the text is counted at its grown length (``core.utterance`` bounds it)."""
    return len(_SAID.sub(lambda m: m[1], text)) if SAY in text else len(text)
