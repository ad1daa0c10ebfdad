"""Text to Kokoro phonemes with espeak-ng, merged into the symbols the voices were trained on; one backend
per language for the life of the process.

The voices learnt misaki's symbols: an affricate or a diphthong is one symbol (``ʧ``, ``I`` for "aɪ"),
where raw espeak writes two (``tʃ``, ``aɪ``), so the model heard two tokens it was not trained to join.
espeak is asked to tie such pairs (``t^ʃ``) and each tied pair becomes its single symbol, as the official
pipeline does for Spanish, French, Hindi, Italian and Portuguese; English gets the official fallback's
conventions (length marks dropped in US English, flaps as ``T``).

kokoro-onnx phonemises through ``phonemizer.phonemize``, which keeps at most eight backends and builds a
new one on every miss. Kokoro speaks nine languages, so a caller rotating ``lang`` misses every time, and
each new backend loads another copy of libespeak-ng that is never unloaded (~5 MB a message, measured).
Here each language gets exactly one backend, built on first use and kept.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

from kokoro_onnx.tokenizer import Tokenizer, _espeak_lock
from phonemizer.backend import EspeakBackend

# phonemizer warns on every call about word counts it cannot match; the phonemes are still right.
_QUIET = logging.getLogger("streamvoice.phonemizer")
_QUIET.setLevel(logging.ERROR)

# Tied pairs to Kokoro's single symbols (the symbol table is misaki's; see its EN_PHONES.md).
TIED: tuple[tuple[str, str], ...] = (
    ("a^ɪ", "I"),
    ("a^ʊ", "W"),
    ("d^z", "ʣ"),
    ("d^ʒ", "ʤ"),
    ("e^ɪ", "A"),
    ("o^ʊ", "O"),
    ("ə^ʊ", "Q"),
    ("s^s", "S"),
    ("t^s", "ʦ"),
    ("t^ʃ", "ʧ"),
    ("ɔ^ɪ", "Y"),
)
# English through espeak (the fallback for words misaki does not know, or the whole text when chosen):
# longest first, so a pair is replaced before its parts.
ENGLISH: tuple[tuple[str, str], ...] = tuple(
    sorted(
        {
            "ʔˌn̩": "ʔn",
            "ʔn̩": "ʔn",
            "a^ɪ": "I",
            "a^ʊ": "W",
            "d^ʒ": "ʤ",
            "e^ɪ": "A",
            "e": "A",
            "t^ʃ": "ʧ",
            "ɔ^ɪ": "Y",
            "ə^l": "ᵊl",
            "ʲo": "jo",
            "ʲə": "jə",
            "ʲ": "",
            "ɚ": "əɹ",
            "r": "ɹ",
            "x": "k",
            "ç": "k",
            "ɐ": "ə",
            "ɬ": "l",
            "\u0303": "",
        }.items(),
        key=lambda kv: -len(kv[0]),
    )
)
_SYLLABIC = re.compile(r"(\S)\u0329")


def merge_tied(phonemes: str) -> str:
    for old, new in TIED:
        phonemes = phonemes.replace(old, new)
    return phonemes.replace("^", "").replace("-", "")


def merge_english(phonemes: str, british: bool) -> str:
    for old, new in ENGLISH:
        phonemes = phonemes.replace(old, new)
    phonemes = _SYLLABIC.sub(r"ᵊ\1", phonemes).replace("\u0329", "")
    if british:
        phonemes = phonemes.replace("e^ə", "ɛː").replace("iə", "ɪə").replace("ə^ʊ", "Q")
    else:
        phonemes = phonemes.replace("o^ʊ", "O").replace("ɜːɹ", "ɜɹ").replace("ɜː", "ɜɹ")
        phonemes = phonemes.replace("ɪə", "iə").replace("ː", "")
    phonemes = phonemes.replace("o", "ɔ").replace("ɾ", "T").replace("ʔ", "t")
    return phonemes.replace("^", "")


class EspeakG2P:
    """espeak-ng for every language it reads well (e, f, h, i, p, and English as a fallback)."""

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
                    backend = EspeakBackend(
                        lang,
                        preserve_punctuation=True,
                        with_stress=True,
                        tie="^",
                        language_switch="remove-flags",
                        logger=_QUIET,
                    )
                self._backends[lang] = backend
        return backend

    def raw(self, text: str, lang: str) -> str:
        """espeak's phonemes with ties marked, lines joined."""
        backend = self._backend(lang)
        lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
        if not lines:
            return ""
        # Parentheses read as espeak's angle quotes, as the official pipeline feeds it.
        lines = [
            line.replace("«", "“").replace("»", "”").replace("(", "«").replace(")", "»") for line in lines
        ]
        # espeak-ng holds process-global state: one phonemisation at a time, as kokoro-onnx does.
        with _espeak_lock:
            phonemized = backend.phonemize(lines, strip=True, njobs=1)
        return " ".join(p.strip() for p in phonemized).replace("«", "(").replace("»", ")")

    def phonemize(self, text: str, lang: str) -> str:
        raw = self.raw(text, lang)
        merged = merge_english(raw, lang == "en-gb") if lang.startswith("en") else merge_tied(raw)
        return self.known(merged)

    def known(self, phonemes: str) -> str:
        """Only symbols in Kokoro's vocabulary, whitespace collapsed."""
        return " ".join(self._tokenizer.known(phonemes).split())

    def tokenize(self, phonemes: str) -> list[int]:
        return list(self._tokenizer.tokenize(phonemes, limit=None))
