"""ElevenLabs' pronunciation rules as lexicon entries: ``{"type": "alias", "string_to_replace", "alias"}`` and
``{"type": "phoneme", "string_to_replace", "phoneme", "alphabet": "ipa" | "cmu-arpabet"}``, and a PLS lexicon
read to the same rules and written back from them (its ``add-from-file`` and ``download``). The checking is
``text.dictionary_rules``'; checked by ``pytest tests/test_elevenlabs_rules.py``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from streamvoice.text.dictionary_rules import (
    ALPHABETS,
    Lexeme,
    RuleError,
    pls_document,
    pls_lexemes,
    said_phonemes,
)
from streamvoice.text.marks import EXACT


def elevenlabs_entry(rule: object) -> tuple[str, str]:
    """One ElevenLabs rule as (word, what is said)."""
    if not isinstance(rule, Mapping):
        raise RuleError(
            'each rule is {"type": "alias", "string_to_replace", "alias"} or {"type": "phoneme", ...}'
        )
    word, kind = rule.get("string_to_replace"), rule.get("type")
    if not isinstance(word, str) or not word.strip():
        raise RuleError('each rule needs "string_to_replace": the text it replaces')
    exact = _case_sensitive(rule, word)
    if kind == "alias":
        alias = rule.get("alias")
        if not isinstance(alias, str) or not alias.strip():
            raise RuleError(f'the alias rule for {word[:40]!r} needs "alias": what to say instead')
        return word, exact + alias
    if kind == "phoneme":
        phoneme, alphabet = rule.get("phoneme"), str(rule.get("alphabet", "")).lower()
        if not isinstance(phoneme, str) or not phoneme.strip():
            raise RuleError(f'the phoneme rule for {word[:40]!r} needs "phoneme"')
        if alphabet not in ALPHABETS:
            raise RuleError(f'the phoneme rule for {word[:40]!r} needs "alphabet": "ipa" or "cmu-arpabet"')
        return word, exact + said_phonemes(phoneme, alphabet)
    raise RuleError(f'rule "type" must be "alias" or "phoneme" (got {str(kind)[:20]!r})')


def _case_sensitive(rule: Mapping[str, Any], word: str) -> str:
    """``case_sensitive`` and ``word_boundaries``, honoured or refused, never stored and ignored:
    ``case_sensitive: true`` matches the word in the case written only (``EXACT`` before what it says);
    false or absent, the written case first, then any case; ``word_boundaries`` true or absent is how every
    rule matches (whole words), and false (inside words) is refused: this server replaces whole words only."""
    case, bounds = rule.get("case_sensitive"), rule.get("word_boundaries")
    for name, value in (("case_sensitive", case), ("word_boundaries", bounds)):
        if value is not None and not isinstance(value, bool):
            raise RuleError(f'"{name}" of the rule for {word[:40]!r} must be true or false')
    if bounds is False:
        raise RuleError(
            f"the rule for {word[:40]!r} asks to match inside words (word_boundaries: false): this server "
            "replaces whole words only; leave word_boundaries out or true"
        )
    return EXACT if case is True else ""


def pls_rules(document: bytes) -> list[dict[str, str]]:
    """A PLS lexicon's lexemes as rules: a ``<phoneme>`` a phoneme rule, an ``<alias>`` an alias rule."""
    return [
        {"type": "phoneme", "string_to_replace": x.grapheme, "phoneme": x.phoneme, "alphabet": x.alphabet}
        if x.phoneme is not None
        else {"type": "alias", "string_to_replace": x.grapheme, "alias": x.alias or ""}
        for x in pls_lexemes(document)
    ]


def pls_of_rules(rules: Sequence[Mapping[str, Any]], lang: str = "en-US") -> str:
    """Rules as a PLS lexicon (what ``download`` gives)."""
    return pls_document(
        [
            Lexeme(str(r.get("string_to_replace", "")), alias=str(r.get("alias", "")))
            if r.get("type") == "alias"
            else Lexeme(
                str(r.get("string_to_replace", "")),
                phoneme=str(r.get("phoneme", "")),
                alphabet="ipa" if str(r.get("alphabet", "")).lower() == "ipa" else "cmu-arpabet",
            )
            for r in rules
        ],
        lang,
    )
