"""Pure text handling: sentence and clause boundaries, markdown cleaning, incremental chunking."""

from streamvoice.text.chunker import (
    FAST_FIRST,
    ChunkPolicy,
    IncrementalSentenceChunker,
    chunk_text,
    estimate_tokens,
)

__all__ = ["FAST_FIRST", "ChunkPolicy", "IncrementalSentenceChunker", "chunk_text", "estimate_tokens"]
