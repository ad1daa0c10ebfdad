"""Streamed text cut into pieces as it arrives (an LLM's tokens): the incremental chunker (its fast first piece,
the abbreviation and number rules) and the quiet cut (a finished sentence is spoken after ``quiet_cut_s`` of
silence). The utterance's text-in side (``core.utterance``); checked by ``pytest tests/test_utterance.py``."""

from __future__ import annotations

from collections.abc import Callable

from streamvoice.text.chunker import FAST_FIRST, IncrementalSentenceChunker
from streamvoice.timer import Timer


class StreamedText:
    """Each piece the chunker cuts goes to ``put`` in order."""

    def __init__(self, put: Callable[[str], None], quiet_cut_s: float) -> None:
        self._put = put
        self._quiet_cut_s = quiet_cut_s
        self._quiet = Timer(self._went_quiet)
        self._chunker: IncrementalSentenceChunker | None = None  # made on the first ``feed``

    def feed(self, text: str) -> None:
        if self._chunker is None:
            self._chunker = IncrementalSentenceChunker(FAST_FIRST)
        self._put_all(self._chunker.feed(text))
        if self._quiet_cut_s > 0:  # a sentence that ends here is spoken if nothing follows soon
            self._quiet.arm(self._quiet_cut_s)

    def flush(self) -> None:
        """What is buffered, as it stands."""
        self._quiet.disarm()
        if self._chunker is not None:
            self._put_all(self._chunker.flush())

    def stop(self) -> None:
        self._quiet.disarm()

    def _went_quiet(self) -> None:
        if self._chunker is not None:
            self._put_all(self._chunker.quiet())

    def _put_all(self, pieces: list[str]) -> None:
        for text in pieces:
            self._put(text)
