"""A message to model calls: cut into chunks, phonemised, kept within what one Kokoro call can take.

Planning is the engine's text side, apart from running the model: the server runs it chunk by chunk on its
own thread (``plan_chunk``), so a long message's first piece reaches the model before the rest is planned.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from typing import Literal

from streamvoice.engine.alignment import WordSpan, split_spans, text_words, voiced_range, word_spans
from streamvoice.engine.g2p import G2P
from streamvoice.text.chunker import ChunkPolicy, chunk_paragraphs
from streamvoice.text.marks import END, MARKS, PHONEMES
from streamvoice.text.normalize import Token, normalize, spoken_text

log = logging.getLogger("streamvoice.planning")

SAFE_MAX_TOKENS = 400  # above this Kokoro rushes; a piece is split before it gets here
# How a message is cut into model calls: a first piece that ends at the first sentence (fast first
# audio), later pieces merged towards Kokoro's comfortable 100-200 tokens (fewer fixed costs per call).
MESSAGE_POLICY = ChunkPolicy(min_tokens=(1, 100), max_tokens=250, clean_markdown=False)


Pause = Literal["none", "clause", "sentence", "paragraph"]
SENTENCE_ENDS = ".!?…。！？।॥"
CLAUSE_ENDS = ",;:—–-，、；："
CLOSERS = "\"')]}»”’*_"


@dataclass(frozen=True)
class Piece:
    """One model call's worth of input, and what is known of it before the model runs."""

    text: str
    phonemes: str
    tokens: tuple[int, ...]
    words: tuple[WordSpan, ...] = ()  # the text's words over the phoneme characters
    pause: Pause = "none"  # the silence its last punctuation calls for after it
    pause_ms: int | None = None  # an explicit silence after it (SSML <break>), instead of ``pause``
    rate: float = 1.0  # times the request's speed (SSML <prosody rate>)

    @property
    def voiced(self) -> tuple[int, int]:
        return voiced_range(self.phonemes)

    @classmethod
    def of_tokens(cls, tokens: tuple[int, ...] | list[int]) -> Piece:
        """A piece known only by its tokens (a benchmark that phonemises the text itself): no words."""
        return cls("", "", tuple(tokens))


def pause_after(text: str, paragraph_end: bool = False) -> Pause:
    """What the end of a stretch of text calls for: nothing inside a run-on sentence, a short pause at a
    clause break, a longer one at a sentence end, the longest at a paragraph break."""
    if paragraph_end:
        return "paragraph"
    end = text.rstrip().rstrip(CLOSERS)
    if not end:
        return "none"
    if end[-1] in SENTENCE_ENDS:
        return "sentence"
    return "clause" if end[-1] in CLAUSE_ENDS else "none"


class Planner:
    def __init__(self, phonemizer: G2P) -> None:
        self.phonemizer = phonemizer

    def plan(self, text: str, lang: str, policy: ChunkPolicy = MESSAGE_POLICY) -> list[Piece]:
        """Cut a message into model calls that never exceed the model's input, in speaking order."""
        return [
            piece
            for chunk, paragraph in chunk_paragraphs(text, policy)
            for piece in self.plan_chunk(chunk, lang, paragraph)
        ]

    def plan_chunk(self, chunk: str, lang: str, paragraph_end: bool = False) -> list[Piece]:
        """One chunk of text to model calls: the unit a server plans at a time, so it can stop between.

        The chunk is normalised first (``text.normalize``: "$12.50" is read "twelve dollars fifty cents"),
        and the word spans found on what is said are put back on the caller's words."""
        try:
            tokens = normalize(chunk, lang)
        except Exception as exc:  # a rule's bug on this text: the text is read as written instead
            log.warning("normalising a chunk failed (%s); reading it as written", type(exc).__name__)
            tokens = [Token(word, word) for word in chunk.split()]
        spoken = spoken_text(tokens)
        phonemes = self._phonemize(spoken, lang)
        plain = spoken.replace(PHONEMES, "").replace(END, "")
        said = word_spans(plain, phonemes, lambda word: self.phonemizer.phonemize(word, lang))
        spans = tuple(replace(w, word=unmarked(w.word)) for w in on_original_words(tokens, said))
        parts = split_phonemes(phonemes, SAFE_MAX_TOKENS)
        pieces: list[Piece] = []
        for i, (start, end) in enumerate(parts):
            part = phonemes[start:end]
            ids = self.phonemizer.tokenize(part)
            if not ids:
                continue
            last = i == len(parts) - 1
            pieces.append(
                Piece(
                    text=chunk,
                    phonemes=part,
                    tokens=tuple(ids),
                    # one token per phoneme character, or the character indices would not be token indices
                    words=split_spans(spans, start, end) if len(ids) == len(part) else (),
                    pause=pause_after(chunk, paragraph_end) if last else pause_after(part),
                )
            )
        return pieces

    def _phonemize(self, spoken: str, lang: str) -> str:
        runs = [
            self.phonemizer.espeak.known(text) if given else self.phonemizer.phonemize(text, lang)
            for given, text in _marked_runs(spoken)
        ]
        return " ".join(r for r in runs if r)


def unmarked(word: str) -> str:
    """A caption word without the private marks spans travel in: they never reach a caller."""
    return "".join(ch for ch in word if ch not in MARKS)


def _marked_runs(spoken: str) -> list[tuple[bool, str]]:
    """(is phonemes, text) runs: what the caller gave as phonemes is not read again."""
    parts = re.split(f"{PHONEMES}([^{END}]*){END}", spoken)
    return [(i % 2 == 1, part) for i, part in enumerate(parts) if part.strip()]


def on_original_words(tokens: list[Token], said: tuple[WordSpan, ...]) -> tuple[WordSpan, ...]:
    """Spans of the spoken words, grouped back into the caller's words: "$12.50" gets the span from
    "twelve" to "cents". Where the counts do not line up (a span covering several words), the spoken
    spans are kept as they are: coarser or differently named, never wrong."""
    if all(t.original == t.spoken for t in tokens):
        return said
    counts = [len(text_words(t.spoken)) for t in tokens]
    if sum(counts) != len(said):
        tokens = written_words(tokens)  # Japanese and Chinese: a rule's span inside a run without spaces
        counts = [len(text_words(t.spoken)) for t in tokens]
        if sum(counts) != len(said):
            return said
    out: list[WordSpan] = []
    k = 0
    for i, (token, n) in enumerate(zip(tokens, counts, strict=True)):
        if n:
            name = token.original
            for after in tokens[i + 1 :]:  # punctuation written against it stays on it, as on any word
                if after.space_before or any(ch.isalnum() for ch in after.original):
                    break
                name += after.original
            out.append(WordSpan(name, said[k].first, said[k + n - 1].last))
            k += n
    return tuple(out)


def written_words(tokens: list[Token]) -> list[Token]:
    """Tokens joined as the caller wrote them, one per run without spaces: "価格は" "¥1,280" "です。" is
    one word, said "価格は千二百八十円です。" and named "価格は¥1,280です。"."""
    out: list[Token] = []
    for token in tokens:
        if out and not token.space_before:
            last = out[-1]
            out[-1] = Token(last.original + token.original, spoken_text([last, token]), last.space_before)
        else:
            out.append(token)
    return out


def split_phonemes(phonemes: str, max_tokens: int) -> list[tuple[int, int]]:
    """Keep a phoneme string within ``max_tokens`` characters, cutting at punctuation, then spaces; the
    parts as character ranges of ``phonemes``, without surrounding spaces."""
    parts: list[tuple[int, int]] = []
    start, end = _strip(phonemes, 0, len(phonemes))
    while end - start > max_tokens:
        window = phonemes[start : start + max_tokens + 1]
        cut = max((window.rfind(p) for p in ".!?;:,"), default=-1)
        if cut < max_tokens // 3:
            cut = window.rfind(" ")
        if cut <= 0:
            cut = max_tokens
        head = _strip(phonemes, start, start + cut + 1)
        if head[1] > head[0]:
            parts.append(head)
        start, end = _strip(phonemes, start + cut + 1, end)
    if end > start:
        parts.append((start, end))
    return parts


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
