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


# One line per language with a value in it, read once at start so the engine's import and the rules'
# compile happen then (``KokoroEngine.warm_up``), never on a caller's first request.
_WARM_TEXT = "1.234,50 € 14:30 12/03/2026 20% 3.5 km 第3 ¥1,280 ₹499"


def warm(lang: str) -> None:
    from streamvoice.text.normalize import say  # normalize imports this module

    say(_WARM_TEXT, lang)
