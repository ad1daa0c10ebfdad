"""What the engine remembers about each voice's decoder statistics, bounded by the voice catalogue.

Windows of a piece normalise with an estimate of the whole piece's statistics (see ``norm_stats``); for
the frames not decoded yet, that estimate is the voice's statistics from earlier pieces. Only the stock
voices are remembered: a caller can invent any number of blends, so a table keyed by whatever callers send
would grow without bound (256 blends held ~200 MB, measured). A blend's statistics are derived on demand
from its parts, weighted as the blend weights them, and never stored.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from streamvoice.engine.streaming.speech_estimate import Reference
from streamvoice.engine.surgery.norm_stats import NormStats
from streamvoice.engine.voices import VoiceSpec

T = TypeVar("T")

# Each new piece counts against at most this many frames of history (15 s of audio), so the statistics
# follow the voice without freezing.
MEMORY_FRAMES = 600.0


class VoiceMemory:
    """Two sets of statistics per stock voice: over its speech (what windows of a piece's speech look
    like), and over the model's silence around it (what the frames a trimmed piece never decodes look like:
    a whole piece normalises over them too)."""

    def __init__(self, stock: frozenset[str]) -> None:
        self._stock = stock
        self._stats: dict[str, NormStats] = {}
        self._silence: dict[str, NormStats] = {}
        # Each stock voice's calibration piece (``speech_estimate``).
        self._references: dict[str, Reference] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._stats)

    def known(self) -> dict[str, tuple[NormStats, NormStats | None]]:
        with self._lock:
            return {name: (stats, self._silence.get(name)) for name, stats in self._stats.items()}

    def get(self, voice: VoiceSpec) -> NormStats | None:
        """The voice's speech statistics; for a blend, its parts' mixed by weight (None if a part is unknown)."""
        return self._mix(self._stats, voice)

    def silence(self, voice: VoiceSpec) -> NormStats | None:
        return self._mix(self._silence, voice)

    def reference(self, voice: VoiceSpec) -> Reference | None:
        """The voice's reference piece for ``speech_estimate`` (its calibration greeting's statistics and
        summaries); a blend's mixed from its parts' (None if a part has none). Kept apart from the statistics
        that pieces teach (``recorder``): what a piece estimates from must be the pair it was fitted on."""
        parts = self._parts(self._references, voice)
        if parts is None:
            return None
        return parts[0][0] if len(parts) == 1 else Reference.mixed(parts)

    def stock_reference(self, name: str) -> Reference | None:
        with self._lock:
            return self._references.get(name)

    def set_reference(self, name: str, reference: Reference | None) -> None:
        self._put(self._references, name, reference)

    def set_silence(self, name: str, stats: NormStats | None) -> None:
        self._put(self._silence, name, stats)

    def set(self, name: str, stats: NormStats | None) -> None:
        """Replace (or with None, forget) a stock voice's speech statistics."""
        self._put(self._stats, name, stats)

    def _put(self, table: dict[str, T], name: str, value: T | None) -> None:
        """Set a stock voice's entry in ``table``, or with None, forget it."""
        if name not in self._stock:
            raise KeyError(f"{name!r} is not a stock voice")
        with self._lock:
            if value is None:
                table.pop(name, None)
            else:
                table[name] = value

    def _parts(self, table: dict[str, T], voice: VoiceSpec) -> list[tuple[T, float]] | None:
        """The voice's parts' entries with their weights (None if a part has none)."""
        with self._lock:
            parts = [(table.get(name), weight) for name, weight in voice.parts]
        return None if any(v is None for v, _ in parts) else [(v, w) for v, w in parts if v is not None]

    def _mix(self, table: dict[str, NormStats], voice: VoiceSpec) -> NormStats | None:
        parts = self._parts(table, voice)
        if parts is None or len(parts) == 1:
            return None if parts is None else parts[0][0]
        mixed: NormStats | None = None
        for stats, weight in parts:
            mixed = NormStats.merge(mixed, stats.weighted(weight * min(stats.frames, MEMORY_FRAMES)))
        return mixed

    def recorder(self, voice: VoiceSpec) -> Callable[[NormStats], None] | None:
        """A callback that folds a finished piece's statistics into the voice's; None for a blend."""
        if len(voice.parts) != 1 or voice.parts[0][0] not in self._stock:
            return None
        name = voice.parts[0][0]

        def remember(stats: NormStats) -> None:
            with self._lock:
                old = self._stats.get(name)
                history = old.weighted(min(old.frames, MEMORY_FRAMES)) if old else None
                merged = NormStats.merge(history, stats)
                assert merged is not None
                self._stats[name] = merged

        return remember
