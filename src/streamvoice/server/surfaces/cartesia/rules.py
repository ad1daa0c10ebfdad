"""Cartesia's pronunciation items as lexicon entries: ``{"text", "alias"}`` (``pronunciation`` in its newer
docs), the alias a sounds-like respelling or IPA as ``<<ˈ|b|ɑ|ˈ|j|u>>``. The checking is
``text.dictionary_rules``'; checked by ``pytest tests/test_cartesia_rules.py``."""

from __future__ import annotations

import re
from collections.abc import Mapping

from streamvoice.text.dictionary_rules import RuleError, said_phonemes

_IPA = re.compile(r"^<<([^<>]{1,256})>>$")


def cartesia_entry(item: object) -> tuple[str, str]:
    """One item as (word, what is said): ``<<a|b>>`` is IPA, anything else a respelling."""
    if not isinstance(item, Mapping):
        raise RuleError('each item is {"text": "...", "alias": "..."}')
    word, alias = item.get("text"), item.get("alias", item.get("pronunciation"))
    if not isinstance(word, str) or not word.strip() or not isinstance(alias, str) or not alias.strip():
        raise RuleError('each item needs "text" (what to replace) and "alias" (what to say instead)')
    if (ipa := _IPA.match(alias.strip())) is not None:
        return word, said_phonemes(ipa[1].replace("|", ""), "ipa")
    return word, alias
