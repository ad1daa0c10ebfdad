"""Text to Kokoro phonemes with espeak-ng, one backend per language for the life of the process.

kokoro-onnx phonemises through ``phonemizer.phonemize``, which keeps at most eight backends and builds a
new one on every miss. Kokoro speaks nine languages, so a caller rotating ``lang`` misses every time, and
each new backend loads another copy of libespeak-ng that is never unloaded (~5 MB a message, measured).
Here each supported language gets exactly one backend, built on first use and kept: memory is bounded by
the language list, whatever callers send.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from kokoro_onnx.tokenizer import Tokenizer, _espeak_lock
from phonemizer.backend import EspeakBackend
from phonemizer.separator import default_separator
from phonemizer.utils import list2str, str2list

# phonemizer warns on every call about word counts it cannot match; the phonemes are still right.
_QUIET = logging.getLogger("streamvoice.phonemizer")
_QUIET.setLevel(logging.ERROR)


class Phonemizer:
    """Same phonemes as kokoro-onnx's ``Tokenizer.phonemize``; backends owned and bounded."""

    def __init__(self, langs: list[str] | tuple[str, ...]) -> None:
        self._tokenizer = Tokenizer()  # also points phonemizer at the bundled espeak-ng library
        self._langs = frozenset(langs)
        self._backends: dict[str, Any] = {}
        self._lock = threading.Lock()

    @property
    def backends(self) -> int:
        return len(self._backends)

    def _backend(self, lang: str) -> Any:
        if lang not in self._langs:
            raise ValueError(f"unsupported lang {lang!r}; use one of {', '.join(sorted(self._langs))}")
        with self._lock:
            backend = self._backends.get(lang)
            if backend is None:
                with _espeak_lock:
                    backend = EspeakBackend(lang, preserve_punctuation=True, with_stress=True, logger=_QUIET)
                self._backends[lang] = backend
        return backend

    def phonemize(self, text: str, lang: str) -> str:
        backend = self._backend(lang)
        lines = [line.strip(os.linesep) for line in str2list(text.strip())]
        lines = [line for line in lines if line.strip()]
        if not lines:
            return ""
        # espeak-ng holds process-global state: one phonemisation at a time, as kokoro-onnx does.
        with _espeak_lock:
            phonemized = backend.phonemize(lines, separator=default_separator, strip=False, njobs=1)
        known = self._tokenizer.known(list2str(phonemized))
        return " ".join(known.split())

    def tokenize(self, phonemes: str) -> list[int]:
        return list(self._tokenizer.tokenize(phonemes, limit=None))
