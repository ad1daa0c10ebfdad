"""streamvoice: AI voice agents that start speaking while the language model is still writing."""

from streamvoice.text.chunker import ChunkPolicy, IncrementalSentenceChunker

__version__ = "0.1.0"
__all__ = ["ChunkPolicy", "IncrementalSentenceChunker", "__version__"]
