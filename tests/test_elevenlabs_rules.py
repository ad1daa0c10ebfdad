"""`server.surfaces.elevenlabs.rules`: ElevenLabs' rules as lexicon entries, PLS in and out as rules."""

from __future__ import annotations

import pytest

from streamvoice.server.surfaces.elevenlabs.rules import elevenlabs_entry, pls_of_rules, pls_rules
from streamvoice.text.dictionary_rules import MAX_RULES, RuleError, lexicon_of
from streamvoice.text.lexicon import apply_lexicon
from streamvoice.text.marks import PHONEMES, SAY, SEP


def test_elevenlabs_rules_alias_ipa_and_cmu() -> None:
    assert elevenlabs_entry({"type": "alias", "string_to_replace": "UN", "alias": "United Nations"}) == (
        "UN",
        "United Nations",
    )
    ipa = {"type": "phoneme", "string_to_replace": "tomato", "phoneme": "təˈmeɪtoʊ", "alphabet": "ipa"}
    assert elevenlabs_entry(ipa) == ("tomato", "/təˈmAtO/")
    cmu = {
        "type": "phoneme",
        "string_to_replace": "tomato",
        "phoneme": "T AH0 M EY1 T OW2",
        "alphabet": "cmu-arpabet",
    }
    assert elevenlabs_entry(cmu) == ("tomato", "/təmˈAtˌO/")
    for bad in (
        {"type": "phoneme", "string_to_replace": "x", "phoneme": "a", "alphabet": "x-sampa"},
        {"type": "alias", "string_to_replace": "x"},
        {"type": "rewrite", "string_to_replace": "x", "alias": "y"},
        {"type": "alias", "alias": "y"},
        "not a rule",
    ):
        with pytest.raises(RuleError):
            elevenlabs_entry(bad)


def test_pls_round_trip_keeps_every_rule() -> None:
    rules = [
        {"type": "alias", "string_to_replace": "UN", "alias": "United Nations"},
        {"type": "phoneme", "string_to_replace": "tomato", "phoneme": "təˈmeɪtoʊ", "alphabet": "ipa"},
        {
            "type": "phoneme",
            "string_to_replace": "butter",
            "phoneme": "B AH1 T ER0",
            "alphabet": "cmu-arpabet",
        },
    ]
    assert pls_rules(pls_of_rules(rules).encode()) == rules


def test_case_sensitive_is_honoured_and_matching_inside_words_is_refused() -> None:
    """Issue #69: ElevenLabs' ``case_sensitive`` and ``word_boundaries`` were stored and ignored."""
    rules = [
        {"type": "alias", "string_to_replace": "US", "alias": "United States", "case_sensitive": True},
        {"type": "alias", "string_to_replace": "Nginx", "alias": "engine x", "case_sensitive": False},
    ]
    lexicon = lexicon_of(rules, elevenlabs_entry)
    said = apply_lexicon("The US and us; NGINX, nginx.", lexicon)
    assert said.count(SAY) == 3  # "US" only as written; "Nginx" in any case
    assert "us;" in said
    with pytest.raises(RuleError, match="whole words only"):
        lexicon_of([{**rules[0], "word_boundaries": False}], elevenlabs_entry)
    assert lexicon_of([{**rules[1], "word_boundaries": True}], elevenlabs_entry)
    with pytest.raises(RuleError, match="true or false"):
        lexicon_of([{**rules[0], "case_sensitive": "yes"}], elevenlabs_entry)


def test_rule_bounds() -> None:
    many = [{"type": "alias", "string_to_replace": f"w{i}", "alias": "x"} for i in range(MAX_RULES + 1)]
    with pytest.raises(RuleError, match="at most"):
        lexicon_of(many, elevenlabs_entry)
    with pytest.raises(RuleError, match="128"):
        lexicon_of([{"type": "alias", "string_to_replace": "w", "alias": "x" * 500}], elevenlabs_entry)
    with pytest.raises(RuleError, match="U\\+0000"):
        lexicon_of([{"type": "alias", "string_to_replace": "w", "alias": "x\x00"}], elevenlabs_entry)


def test_an_alias_that_holds_its_own_word_is_said_once_never_expanded_again() -> None:
    lexicon = lexicon_of(
        [{"type": "alias", "string_to_replace": "NASA", "alias": "NASA NASA NASA"}], elevenlabs_entry
    )
    said = apply_lexicon("NASA and NASA.", lexicon)
    assert said.count(SAY) == 2 and said.count("NASA") == 2 * (1 + 3)
    phonemes = lexicon_of([{"type": "phoneme", "string_to_replace": "x", "phoneme": "ɛks", "alphabet": "ipa"}],
                          elevenlabs_entry)  # fmt: skip
    assert apply_lexicon("x", phonemes) == f"{PHONEMES}x{SEP}ɛks\ue002"
