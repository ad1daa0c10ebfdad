"""Turning a live token stream into speakable pieces the moment each one is complete.

Two stages, both pure and incremental:

1. Markdown cleaning, one whitespace-delimited token at a time (a token is cleaned once the whitespace
   after it has arrived).
2. Cutting: sentence ends (plus, for the very first piece, clause breaks when ``fast_first`` is on), a
   minimum piece length that grows piece by piece (short pieces sound weak and each model call has a fixed
   cost), and a maximum (long pieces sound rushed and must fit the model's 510-token input).

Every decision depends only on the text, never on how it was fragmented, so feeding a stream token by
token yields exactly the pieces that feeding it whole would.

The work per character fed is bounded: only the new fragment is searched for the last space, a token
that never ends is cleaned every ``MAX_TOKEN_CHARS``, and cuts are searched in a window of the pending
text just long enough to hold the longest piece (``test_chunker_work_per_character_is_bounded`` feeds
a long text at once, and one without a space character by character).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from streamvoice.text.boundaries import (
    CJK_STOPS,
    clause_cuts,
    ends_sentence,
    phrase_cuts,
    sentence_cuts,
    word_cuts,
)
from streamvoice.text.markdown import clean_token
from streamvoice.text.marks import END, PHONEMES, SAY

Measure = Callable[[str], int]
# A run of text this long with no whitespace is cleaned and cut as if a space followed it: no real word is
# this long, and waiting for its end would make every fragment rescan it.
MAX_TOKEN_CHARS = 1_000


def estimate_tokens(text: str) -> int:
    """Kokoro phoneme tokens, estimated without a phonemiser.

    English runs at about 1.1 phoneme tokens per character (measured on the bench texts); CJK characters
    expand to several phonemes each.
    """
    wide = sum(1 for ch in text if ord(ch) >= 0x2E80)
    return int((len(text) - wide) * 1.1 + wide * 3)


@dataclass(frozen=True)
class ChunkPolicy:
    """Piece lengths in phoneme tokens (Kokoro: weak under ~10-20, best 100-200, rushed over ~400)."""

    min_tokens: Sequence[int] = (12, 24, 48, 96)  # piece k needs min_tokens[min(k, len-1)]
    max_tokens: int = 300
    fast_first: bool = False  # let the first piece end at a clause or phrase break
    first_clause_min_tokens: int = 12  # a first clause shorter than this waits for more
    first_phrase_min_tokens: int = 18  # cut before "because", "and", ... once the head is this long
    clean_markdown: bool = True

    def min_for(self, index: int) -> int:
        return self.min_tokens[min(index, len(self.min_tokens) - 1)] if self.min_tokens else 0


FAST_FIRST = ChunkPolicy(fast_first=True)


def normalize_space(text: str) -> str:
    return " ".join(text.split())


@dataclass
class IncrementalSentenceChunker:
    """Feed text fragments, get back pieces ready for synthesis; ``flush`` releases the rest."""

    policy: ChunkPolicy = field(default_factory=ChunkPolicy)
    measure: Measure = estimate_tokens

    def __post_init__(self) -> None:
        self._raw = ""  # text not yet cleaned (its last token may be incomplete)
        self._line_start = True  # does the next raw token start a line?
        self._pending = ""  # cleaned text not yet emitted
        self._pending_starts_line = True
        self._emitted = 0

    @property
    def pieces_emitted(self) -> int:
        return self._emitted

    def feed(self, fragment: str) -> list[str]:
        if not fragment:
            return []
        split = _last_space_end(fragment)
        self._raw += fragment
        if split == 0 and len(self._raw) < MAX_TOKEN_CHARS:
            return []  # the token in progress is still open: nothing new is decided
        self._clean(final=False)
        return self._cut(final=False)

    def quiet(self) -> list[str]:
        """The text has stopped arriving for a while: if it ends with a finished sentence, release it now
        instead of waiting for a character that may never come.

        A language model that has written "evening." and pauses has finished a sentence in nearly every
        case; the rules that keep "Dr." or "3." from ending one still apply (a title, a single letter or a
        number before the stop: no cut). The one decision that depends on timing rather than text, so
        callers make it only after ``QUIET_CUT_S`` of silence."""
        if not ends_sentence(self._pending + self._raw):
            return []
        self._clean(final=True)
        pieces = self._cut(final=False)
        rest = normalize_space(self._pending)
        if rest:  # the finished sentence, however short: it is all the listener will get for now
            pieces.extend(self._emit(rest))
            self._pending = ""
            self._pending_starts_line = False
        return pieces

    def flush(self) -> list[str]:
        self._clean(final=True)
        pieces = self._cut(final=True)
        rest = normalize_space(self._pending)
        if rest:
            pieces.extend(self._emit(rest))
        self._pending = ""
        self._pending_starts_line = True
        return pieces

    # -- stage 1: cleaning --------------------------------------------------------------------------
    def _clean(self, final: bool) -> None:
        raw = self._raw
        end = len(raw) if final else _last_space_end(raw)
        if end <= 0 and len(raw) >= MAX_TOKEN_CHARS:
            end = len(raw) - len(raw) % MAX_TOKEN_CHARS  # whole runs of MAX_TOKEN_CHARS, as if spaced
        if end <= 0:
            return
        out: list[str] = []
        i = 0
        while i < end:
            if raw[i].isspace():
                j = i
                while j < end and raw[j].isspace():
                    j += 1
                gap = raw[i:j]
                if "\n" in gap:
                    self._line_start = True
                out.append(gap)
                i = j
            else:
                j = i
                while j < end and not raw[j].isspace() and j - i < MAX_TOKEN_CHARS:
                    j += 1
                    if raw[j - 1] in CJK_STOPS:
                        break  # CJK text has no spaces: its stops end tokens too
                token = raw[i:j]
                out.append(clean_token(token, self._line_start) if self.policy.clean_markdown else token)
                self._line_start = False
                i = j
        self._raw = raw[end:]
        self._pending += "".join(out)

    # -- stage 2: cutting ---------------------------------------------------------------------------
    def _cut(self, final: bool) -> list[str]:
        pieces: list[str] = []
        while True:
            cut = self._next_cut(final)
            if cut is None:
                return pieces
            head, self._pending = self._pending[:cut], self._pending[cut:]
            self._pending_starts_line = head.endswith("\n")
            text = normalize_space(head)
            if text:
                pieces.extend(self._emit(text))

    def _window(self) -> str:
        """The head of the pending text that can decide the next cut: long enough to hold twice the
        longest piece (a cut past it would be cut back to the longest piece, within it), and no longer."""
        pending, size = self._pending, 2 * max(self.policy.max_tokens, 64)
        while (
            size < len(pending)
            and self.measure(normalize_space(pending[:size])) <= 2 * self.policy.max_tokens
        ):
            size *= 2  # mostly whitespace: look further
        return pending[:size]

    def _next_cut(self, final: bool) -> int | None:
        pending = self._window()
        final = final and len(pending) == len(self._pending)
        prefix = "\n" if self._pending_starts_line else "x "
        scan = prefix + pending
        cuts, until = sentence_cuts(scan, final)
        offset = len(prefix)
        candidates = [c - offset for c in cuts if c > offset]
        decided_until = until - offset
        if self.policy.fast_first and self._emitted == 0:
            clause_min = self.policy.first_clause_min_tokens
            phrase_min = self.policy.first_phrase_min_tokens
            candidates += [
                c
                for c in clause_cuts(pending)
                if c < decided_until and self.measure(pending[:c]) >= clause_min
            ]
            candidates += [
                c
                for c in phrase_cuts(pending)
                if c < decided_until and self.measure(pending[:c]) >= phrase_min
            ]
        need = self.policy.min_for(self._emitted)
        for c in sorted(set(candidates)):
            size = self.measure(normalize_space(pending[:c]))
            if size >= need:
                return (
                    c
                    if size <= self.policy.max_tokens
                    else _bounded_cut(pending[:c], self.policy.max_tokens, self.measure)
                )
        # A sentence still in progress that is already too long: cut it at the last clause (or word)
        # break that keeps the head within bounds. Waiting is pointless, its head cannot change.
        undecided = pending[: max(decided_until, 0)] if not final else pending
        if self.measure(normalize_space(undecided)) > self.policy.max_tokens:
            return _bounded_cut(undecided, self.policy.max_tokens, self.measure)
        return None

    def _emit(self, text: str) -> list[str]:
        parts = split_to_max(text, self.policy.max_tokens, self.measure)
        self._emitted += len(parts)
        return parts


# How long text must have stopped arriving before a finished sentence at its end is released
# (``quiet``). It costs at most this much first audio for a reply that stops there (without it: never,
# until the stream ends), and nothing when more text follows sooner.
QUIET_CUT_S = 0.2


_SPAN = re.compile(f"[{SAY}{PHONEMES}][^{END}]*{END}")


def _last_space_end(text: str) -> int:
    for i in range(len(text) - 1, -1, -1):
        if text[i].isspace() or text[i] in CJK_STOPS:
            return i + 1
    return 0


def _bounded_cut(text: str, max_tokens: int, measure: Measure) -> int:
    """The latest clause break (else word break, else character) keeping the head within max_tokens.

    A head's measure only grows with its length, so the latest fitting cut is found by bisection: a few
    measurements per cut instead of one per candidate (a long text without sentence ends stays linear).
    """

    def fits(c: int) -> bool:
        return measure(normalize_space(text[:c])) <= max_tokens

    spans = [(m.start(), m.end()) for m in _SPAN.finditer(text)]

    def allowed(c: int) -> bool:  # a span (SSML sub, phoneme, say-as; a lexicon word) is never cut inside
        return not any(start < c < end for start, end in spans)

    for cuts in (clause_cuts(text), word_cuts(text), [i for i, ch in enumerate(text) if ch in CJK_STOPS]):
        inside = sorted(c for c in set(cuts) if 0 < c < len(text) and allowed(c))
        best = _last_true(inside, fits)
        if best is not None:
            return best
    characters = [c for c in range(1, len(text) + 1) if allowed(c)]
    best = _last_true(characters[1:], lambda c: measure(text[:c]) <= max_tokens)
    return best if best is not None else characters[0]


def _last_true(items: Sequence[int], ok: Callable[[int], bool]) -> int | None:
    """The last item for which ``ok`` holds, given that ``ok`` holds for a prefix of ``items``."""
    lo, hi = 0, len(items)  # ok holds before lo, fails from hi
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(items[mid]):
            lo = mid + 1
        else:
            hi = mid
    return items[lo - 1] if lo > 0 else None


def split_to_max(text: str, max_tokens: int, measure: Measure = estimate_tokens) -> list[str]:
    """Split one piece into parts that each fit max_tokens, preferring clause then word breaks."""
    parts: list[str] = []
    while measure(text) > max_tokens:
        cut = _bounded_cut(text, max_tokens, measure)
        head = normalize_space(text[:cut])
        if head:
            parts.append(head)
        text = text[cut:].strip()
    if text:
        parts.append(normalize_space(text))
    return parts


def chunk_text(text: str, policy: ChunkPolicy | None = None, measure: Measure = estimate_tokens) -> list[str]:
    """Cut a complete text the same way a stream of it would be cut."""
    chunker = IncrementalSentenceChunker(policy or ChunkPolicy(), measure)
    return chunker.feed(text) + chunker.flush()


def normalize_text(text: str, clean: bool = True) -> str:
    """What the chunker's pieces, joined with spaces, should equal (whitespace aside)."""
    chunker = IncrementalSentenceChunker(ChunkPolicy(clean_markdown=clean))
    chunker._raw = text
    chunker._clean(final=True)
    return normalize_space(chunker._pending)


def chunk_paragraphs(text: str, policy: ChunkPolicy | None = None) -> list[tuple[str, bool]]:
    """``chunk_text`` per paragraph (a blank line ends one), each chunk with whether it ends a paragraph:
    a paragraph break is the longest pause, so no chunk spans one. The text's last chunk ends a paragraph
    only if a blank line follows it."""
    paragraphs = [p for p in re.split(r"\n[^\S\n]*\n\s*", text)]
    out: list[tuple[str, bool]] = []
    for i, paragraph in enumerate(paragraphs):
        chunks = chunk_text(paragraph, policy)
        out.extend((chunk, False) for chunk in chunks)
        if out and chunks and (i < len(paragraphs) - 1):
            out[-1] = (out[-1][0], True)
    return out
