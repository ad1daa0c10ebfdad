"""Japanese as the voices were trained: misaki's cutlet path (MeCab through fugashi, the UniDic-lite
dictionary bundled in its wheel). espeak read kanji as the English words "Chinese letter".

The pyopenjtalk path is not used: it appends a pitch string meant for another model. ``misaki.ja`` imports
pyopenjtalk at the top, so the pack installs ``pyopenjtalk-plus`` (a wheel with its dictionary inside;
plain ``pyopenjtalk`` builds from source and downloads its dictionary on first use).
"""

from __future__ import annotations

import threading


class MisakiJapanese:
    def __init__(self) -> None:
        from misaki import ja

        self._g2p = ja.JAG2P()  # version="cutlet"
        self._lock = threading.Lock()

    def __call__(self, text: str) -> str:
        with self._lock:
            phonemes, _ = self._g2p(text)
        return str(phonemes)
