"""The voices' style vectors: the stock packs from ``voices-v1.0.bin``, and blends' (``af_heart:0.7+
bf_emma:0.3``) computed when first asked for, the most recent few kept. Checked by
``pytest tests/test_voices.py``."""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from streamvoice.engine.voices import VoiceSpec, blend_style

# Blends' style packs (~0.5 MB each) are computed on demand; the most recent few are kept.
BLEND_STYLE_CACHE = 16


class VoiceStyles:
    def __init__(self, voices_file: Path) -> None:
        with np.load(voices_file) as packs:
            self._packs: dict[str, NDArray[np.float32]] = {
                k: packs[k].astype(np.float32) for k in packs.files
            }
        self.names = frozenset(self._packs)
        self._blends: OrderedDict[str, NDArray[np.float32]] = OrderedDict()
        self._lock = threading.Lock()  # planning threads ask for blends concurrently

    def pack(self, voice: VoiceSpec) -> NDArray[np.float32]:
        """The voice's style pack: one row per token count."""
        if len(voice.parts) == 1:
            return self._packs[voice.parts[0][0]]
        key = voice.text
        with self._lock:
            pack = self._blends.pop(key, None)
            if pack is None:
                pack = blend_style(voice, self._packs)
            self._blends[key] = pack  # most recent last
            while len(self._blends) > BLEND_STYLE_CACHE:
                self._blends.popitem(last=False)
        return pack

    @property
    def blends_kept(self) -> int:
        return len(self._blends)
