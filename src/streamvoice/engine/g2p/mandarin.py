"""Mandarin as the v1.0 voices were trained: misaki's legacy path (jieba words, pypinyin syllables, IPA
with tone arrows, numbers through cn2an). espeak marked tones with digits Kokoro's vocabulary does not
have, so every tone was dropped.

misaki passes Latin runs through raw; here each one goes to the English G2P instead, so "我用iPhone" says
the brand, not its letters as Chinese.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

_LATIN = re.compile(r"([A-Za-z][A-Za-z'\- ]*[A-Za-z]|[A-Za-z])")


class MisakiMandarin:
    def __init__(self, english: Callable[[str], str]) -> None:
        from misaki import zh

        self._zh = zh.ZHG2P(version=None)
        self._english = english
        self._lock = threading.Lock()

    def __call__(self, text: str) -> str:
        parts: list[str] = []
        for i, segment in enumerate(_LATIN.split(text)):
            if not segment.strip():
                continue
            if i % 2:  # a Latin run
                parts.append(self._english(segment))
            else:
                with self._lock:
                    phonemes, _ = self._zh(segment)
                parts.append(str(phonemes))
        return " ".join(p for p in parts if p)
