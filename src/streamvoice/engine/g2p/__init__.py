"""Grapheme to phoneme, per language family, behind one face: ``G2P.phonemize(text, lang)``.

- English (``en-us``, ``en-gb``): misaki's G2P (``english``) with espeak for unknown words, or espeak alone
  (``EngineOptions.english_g2p``); espeak alone also when the ``en`` pack is not installed.
- Japanese (``ja``): misaki's cutlet path (``japanese``), the ``ja`` pack.
- Mandarin (``cmn``): misaki's v1.0 path, Latin runs through the English G2P (``mandarin``), the ``zh`` pack.
- Spanish, French, Hindi, Italian, Portuguese: espeak-ng with the official symbol merges (``espeak``).

A language whose pack is missing raises ``LanguagePackMissing`` naming the extra to install; nothing is
ever downloaded at run time. Each backend is built on first use and kept for the process's life.

Every backend gets bounded text (``bounds``: pathological runs split, long numbers read digit by digit),
and a backend that fails on a text gets it again word by word (and a CJK word character by character),
leaving out only what it cannot read: one rare character never fails a whole message.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from streamvoice.engine.g2p import packs
from streamvoice.engine.g2p.bounds import bounded
from streamvoice.engine.g2p.espeak import EspeakG2P
from streamvoice.engine.g2p.packs import LanguagePackMissing

__all__ = ["G2P", "G2PError", "LanguagePackMissing"]

log = logging.getLogger("streamvoice.g2p")
ENGLISH_CHOICES = ("misaki", "espeak")


class G2PError(ValueError):
    """Nothing of this text could be read in this language."""


class G2P:
    def __init__(self, langs: list[str] | tuple[str, ...], english: str = "misaki") -> None:
        if english not in ENGLISH_CHOICES:
            raise ValueError(f"english_g2p must be one of {', '.join(ENGLISH_CHOICES)}, not {english!r}")
        self.langs = tuple(langs)
        self.espeak = EspeakG2P(langs)
        self.english = english if english == "espeak" or packs.status("en").installed else "espeak"
        if self.english != english:
            log.warning("the 'en' language pack is not installed: English is read by espeak alone")
        self._backends: dict[str, Callable[[str], str]] = {}
        self._lock = threading.RLock()  # Mandarin builds the English backend inside its own build

    @property
    def backends(self) -> int:
        """Backends built so far (at most one per language)."""
        return len(self._backends)

    def installed(self, lang: str) -> bool:
        return lang in self.langs and packs.installed(lang)

    def check(self, lang: str) -> None:
        """``ValueError`` for an unknown language, ``LanguagePackMissing`` for one not installed."""
        if lang not in self.langs:
            raise ValueError(f"unsupported lang {lang!r}; use one of {', '.join(sorted(self.langs))}")
        packs.require(lang)

    def phonemize(self, text: str, lang: str) -> str:
        backend = self._backend(lang)
        text = bounded(text, lang)
        try:
            return self.espeak.known(backend(text))
        except Exception as exc:  # the backend's own bug on this text: read what it can
            log.warning(
                "%s phonemiser failed on a piece (%s); reading what it can of it", lang, type(exc).__name__
            )
        return self._piecemeal(text, backend)

    def _piecemeal(self, text: str, backend: Callable[[str], str]) -> str:
        """What ``backend`` can read of ``text``: halves read apart until each reads, a single character it
        cannot read left out (a few calls per bad character, not one per character)."""
        said = self._readable(text.strip(), backend)
        if not said.strip() and any(ch.isalnum() for ch in text):
            raise G2PError("nothing of this text could be read in this language")
        return said

    def _readable(self, text: str, backend: Callable[[str], str]) -> str:
        if not text:
            return ""
        try:
            return self.espeak.known(backend(text))
        except Exception:
            if len(text) == 1:
                return ""
        middle = len(text) // 2
        space = text.rfind(" ", 0, middle + 1)
        cut = space if space > 0 else middle
        head, tail = self._readable(text[:cut].strip(), backend), self._readable(text[cut:].strip(), backend)
        return " ".join(part for part in (head, tail) if part)

    def tokenize(self, phonemes: str) -> list[int]:
        return self.espeak.tokenize(phonemes)

    def _backend(self, lang: str) -> Callable[[str], str]:
        backend = self._backends.get(lang)
        if backend is not None:
            return backend
        self.check(lang)
        with self._lock:
            backend = self._backends.get(lang)
            if backend is None:
                backend = self._build(lang)
                self._backends[lang] = backend
        return backend

    def _build(self, lang: str) -> Callable[[str], str]:
        if lang in ("en-us", "en-gb") and self.english == "misaki":
            from streamvoice.engine.g2p.english import MisakiEnglish

            return MisakiEnglish(self.espeak, british=lang == "en-gb")
        if lang == "ja":
            from streamvoice.engine.g2p.japanese import MisakiJapanese

            return MisakiJapanese()
        if lang == "cmn":
            from streamvoice.engine.g2p.mandarin import MisakiMandarin

            return MisakiMandarin(self._backend("en-us"))
        return lambda text: self.espeak.phonemize(text, lang)
