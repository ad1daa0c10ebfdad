"""Which rules read numbers, money, times and dates in which language: the one face ``text.normalize``
asks, so a language is added in one place.

A language whose number engine is missing (``text.number_words.available``) gets none, and its G2P reads
the digits as written; the log says so once.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from streamvoice.text import hindi, japanese, mandarin
from streamvoice.text import number_words as nw
from streamvoice.text.locales import LATIN, latin_rules

Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], str]]


@functools.cache
def language_rules(lang: str) -> tuple[Rule, ...]:
    fam = nw.family(lang)
    if not nw.available(lang):
        return ()
    if fam in LATIN:
        return latin_rules(LATIN[fam])
    return {"ja": japanese.RULES, "zh": mandarin.RULES, "hi": hindi.RULES}.get(fam, ())
