"""Which phoneme characters spell which of the text's words: planned with the text, timed by the model.

espeak-ng keeps word breaks as spaces in the phoneme string, so the text's words and the phoneme groups
usually pair one to one. Where they do not (numbers, abbreviations, symbols: "$3.50" is five groups, "Dr."
one), each word is phonemised alone to count its groups. Where even that disagrees (espeak joins a few
function words), the words between two punctuation marks share one span, and if the punctuation does not
line up either, the piece's words share one span: a caption may then be coarser, never wrong.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# Phoneme characters that are not sounds: word breaks and the punctuation espeak-ng keeps.
NON_SPEECH = frozenset(" ;:,.!?¡¿—…\"«»“”()-–'’‘")
BREAKS = frozenset(",.;:!?—…。！？，、；：")


@dataclass(frozen=True)
class WordSpan:
    """A word (or several, where they could not be told apart) and its phoneme characters [first, last)."""

    word: str
    first: int
    last: int


@dataclass(frozen=True)
class WordTime:
    word: str
    start_ms: float
    end_ms: float


def text_words(text: str) -> list[str]:
    """The text's words as written (punctuation attached); tokens with nothing to say are not words."""
    return [w for w in re.findall(r"\S+", text) if any(ch.isalnum() for ch in w)]


def phoneme_groups(phonemes: str) -> list[tuple[int, int, bool]]:
    """Spoken groups as (first, last) character ranges without punctuation, and whether a break follows."""
    groups: list[tuple[int, int, bool]] = []
    for match in re.finditer(r"\S+", phonemes):
        a, b = match.start(), match.end()
        chars = [i for i in range(a, b) if phonemes[i] not in NON_SPEECH]
        if chars:
            groups.append((chars[0], chars[-1] + 1, any(ch in BREAKS for ch in phonemes[chars[-1] : b])))
        elif groups and any(ch in BREAKS for ch in phonemes[a:b]):
            first, last, _ = groups[-1]
            groups[-1] = (first, last, True)
    return groups


def voiced_range(phonemes: str) -> tuple[int, int]:
    """Characters from the first sound to the last (what is worth decoding)."""
    chars = [i for i, ch in enumerate(phonemes) if ch not in NON_SPEECH]
    return (chars[0], chars[-1] + 1) if chars else (0, 0)


def word_spans(text: str, phonemes: str, phonemize: Callable[[str], str]) -> tuple[WordSpan, ...]:
    words = text_words(text)
    groups = phoneme_groups(phonemes)
    if not words or not groups:
        return ()
    if len(words) == len(groups):
        return tuple(WordSpan(w, g[0], g[1]) for w, g in zip(words, groups, strict=True))
    alone = [phonemize(w) for w in words]
    counts = [len(phoneme_groups(p)) for p in alone]
    if sum(counts) == len(groups) and all(counts):
        spans: list[WordSpan] = []
        k = 0
        for word, n in zip(words, counts, strict=True):
            spans.append(WordSpan(word, groups[k][0], groups[k + n - 1][1]))
            k += n
        return tuple(spans)
    return _by_characters(words, alone, phonemes) or _by_clause(words, groups)


def _by_characters(words: list[str], alone: list[str], phonemes: str) -> tuple[WordSpan, ...] | None:
    """Each word's phonemes (said alone) found in the piece's, sound by sound, in order: espeak joins some
    words into one group ("from the" is "fɹʌmðə"), which the counts cannot see but the sounds can. None if
    a word's sounds are not found or the result would not be in order."""
    target = [i for i, ch in enumerate(phonemes) if ch not in NON_SPEECH and ch not in "ˈˌ"]
    said = "".join(phonemes[i] for i in target)
    joined, ranges = "", []
    for p in alone:
        sounds = "".join(ch for ch in p if ch not in NON_SPEECH and ch not in "ˈˌ")
        ranges.append((len(joined), len(joined) + len(sounds)))
        joined += sounds
    matcher = difflib.SequenceMatcher(a=joined, b=said, autojunk=False)
    where: dict[int, int] = {}
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            where[block.a + k] = block.b + k
    if len(where) < 0.8 * len(joined):  # too different to trust
        return None
    spans: list[WordSpan] = []
    for word, (a, b) in zip(words, ranges, strict=True):
        hits = [where[k] for k in range(a, b) if k in where]
        if not hits:
            return None
        first, last = target[min(hits)], target[max(hits)] + 1
        if spans and first < spans[-1].last:
            return None
        spans.append(WordSpan(word, first, last))
    return tuple(spans)


def _by_clause(words: list[str], groups: list[tuple[int, int, bool]]) -> tuple[WordSpan, ...]:
    """One span per stretch between punctuation marks, if the text and the phonemes have the same ones."""
    word_runs = _runs(words, [any(ch in BREAKS for ch in w[-2:]) for w in words])
    group_runs = _runs(groups, [g[2] for g in groups])
    if len(word_runs) != len(group_runs):
        return (WordSpan(" ".join(words), groups[0][0], groups[-1][1]),)
    spans: list[WordSpan] = []
    for ws, gs in zip(word_runs, group_runs, strict=True):
        if len(ws) == len(gs):
            spans.extend(WordSpan(w, g[0], g[1]) for w, g in zip(ws, gs, strict=True))
        else:
            spans.append(WordSpan(" ".join(ws), gs[0][0], gs[-1][1]))
    return tuple(spans)


def _runs[T](items: Sequence[T], ends: list[bool]) -> list[list[T]]:
    runs: list[list[T]] = [[]]
    for item, end in zip(items, ends, strict=True):
        runs[-1].append(item)
        if end:
            runs.append([])
    return [r for r in runs if r]


def split_spans(spans: tuple[WordSpan, ...], start: int, end: int) -> tuple[WordSpan, ...]:
    """The spans that start inside characters [start, end), re-based to ``start`` and clipped to ``end``."""
    return tuple(
        WordSpan(s.word, s.first - start, min(s.last, end) - start) for s in spans if start <= s.first < end
    )


def shift(times: list[WordTime], offset_ms: float) -> list[WordTime]:
    """A piece's word times counted from an earlier point (the message's first sample)."""
    return [WordTime(t.word, round(t.start_ms + offset_ms, 1), round(t.end_ms + offset_ms, 1)) for t in times]


def as_json(times: list[WordTime]) -> list[dict[str, object]]:
    return [{"word": t.word, "start_ms": t.start_ms, "end_ms": t.end_ms} for t in times]
