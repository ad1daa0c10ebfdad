"""Which language's value rules read which language: the one face ``text.normalize`` asks. Adding a language
is one module in ``text/languages/`` (its tables and readings, its rules from ``text.rules``' kinds) and
one line here (``docs/languages.md`` has the steps).

A language whose number engine is missing (``text.number_words.available``) gets no value rules, and its
G2P reads the digits as written; the log says so once.
"""

from __future__ import annotations

import functools

from streamvoice.text import number_words as nw
from streamvoice.text.languages import (
    english,
    french,
    hindi,
    italian,
    japanese,
    mandarin,
    portuguese,
    spanish,
)
from streamvoice.text.rules import Language, SymbolWords

BY_FAMILY: dict[str, Language] = {
    "es": spanish.LANGUAGE,
    "fr": french.LANGUAGE,
    "it": italian.LANGUAGE,
    "pt": portuguese.LANGUAGE,
    "ja": japanese.LANGUAGE,
    "zh": mandarin.LANGUAGE,
    "hi": hindi.LANGUAGE,
}


WORDS_BY_FAMILY: dict[str, SymbolWords] = {
    "en": english.WORDS,
    "es": spanish.WORDS,
    "fr": french.WORDS,
    "it": italian.WORDS,
    "pt": portuguese.WORDS,
    "ja": japanese.WORDS,
    "zh": mandarin.WORDS,
    "hi": hindi.WORDS,
}


def symbol_words(lang: str) -> SymbolWords:
    """What the language says for symbols and addresses; English for a language we have none for."""
    return WORDS_BY_FAMILY.get(nw.family(lang), english.WORDS)


@functools.cache
def language_rules(lang: str) -> Language | None:
    """The language's rules; None for a language we have none for (its digits are read as written)."""
    if lang.startswith("en"):
        return english.AMERICAN if lang == "en-us" else english.BRITISH
    if not nw.available(lang):
        return None
    return BY_FAMILY.get(nw.family(lang))
