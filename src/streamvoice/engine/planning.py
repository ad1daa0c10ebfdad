"""A message to model calls: cut into chunks, phonemised, kept within what one Kokoro call can take.

Planning is the engine's text side, apart from running the model: the server runs it chunk by chunk on its
own thread (``plan_chunk``), so a long message's first piece reaches the model before the rest is planned.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamvoice.engine.phonemes import Phonemizer
from streamvoice.text.chunker import ChunkPolicy, chunk_text

SAFE_MAX_TOKENS = 400  # above this Kokoro rushes; a piece is split before it gets here
# How a message is cut into model calls: a first piece that ends at the first sentence (fast first
# audio), later pieces merged towards Kokoro's comfortable 100-200 tokens (fewer fixed costs per call).
MESSAGE_POLICY = ChunkPolicy(min_tokens=(1, 100), max_tokens=250, clean_markdown=False)


@dataclass(frozen=True)
class Piece:
    """One model call's worth of input."""

    text: str
    phonemes: str
    tokens: tuple[int, ...]


class Planner:
    def __init__(self, phonemizer: Phonemizer) -> None:
        self.phonemizer = phonemizer

    def plan(self, text: str, lang: str, policy: ChunkPolicy = MESSAGE_POLICY) -> list[Piece]:
        """Cut a message into model calls that never exceed the model's input, in speaking order."""
        return [piece for chunk in chunk_text(text, policy) for piece in self.plan_chunk(chunk, lang)]

    def plan_chunk(self, chunk: str, lang: str) -> list[Piece]:
        """One chunk of text to model calls: the unit a server plans at a time, so it can stop between."""
        pieces: list[Piece] = []
        for part in split_phonemes(self.phonemizer.phonemize(chunk, lang), SAFE_MAX_TOKENS):
            tokens = self.phonemizer.tokenize(part)
            if tokens:
                pieces.append(Piece(text=chunk, phonemes=part, tokens=tuple(tokens)))
        return pieces


def split_phonemes(phonemes: str, max_tokens: int) -> list[str]:
    """Keep a phoneme string within ``max_tokens`` characters, cutting at punctuation, then spaces."""
    parts: list[str] = []
    rest = phonemes.strip()
    while len(rest) > max_tokens:
        window = rest[: max_tokens + 1]
        cut = max((window.rfind(p) for p in ".!?;:,"), default=-1)
        if cut < max_tokens // 3:
            cut = window.rfind(" ")
        if cut <= 0:
            cut = max_tokens
        parts.append(rest[: cut + 1].strip())
        rest = rest[cut + 1 :].strip()
    if rest:
        parts.append(rest)
    return parts
