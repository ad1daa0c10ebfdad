"""`text.dictionary_rules`: the vendors' dictionary rules as lexicon entries, PLS in and out, and the bounds."""

from __future__ import annotations

import pytest

from streamvoice.text.dictionary_rules import (
    MAX_RULES,
    RuleError,
    arpabet_to_kokoro,
    cartesia_entry,
    elevenlabs_entry,
    lexicon_of,
    pls_document,
    pls_rules,
)
from streamvoice.text.lexicon import apply_lexicon
from streamvoice.text.marks import PHONEMES, SAY, SEP


def test_arpabet_in_the_voices_symbols_with_stress_before_the_vowel() -> None:
    assert arpabet_to_kokoro("T AH0 M EY1 T OW2") == "təmˈAtˌO"
    assert arpabet_to_kokoro("b ah1 t er0") == "bˈʌtəɹ"  # any case; ER0 reduced
    for bad in ("T AH9 X", "QQ", ""):
        with pytest.raises(RuleError):
            arpabet_to_kokoro(bad)


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


def test_cartesia_items_ipa_in_double_angle_brackets_or_a_respelling() -> None:
    assert cartesia_entry({"text": "bayou", "alias": "<<ˈ|b|ɑ|ˈ|j|u>>"}) == ("bayou", "/ˈbɑˈju/")
    assert (
        cartesia_entry({"text": "tchoupitoulas", "pronunciation": "chop-uh-TOO-liss"})[1]
        == "chop-uh-TOO-liss"
    )
    with pytest.raises(RuleError):
        cartesia_entry({"text": "x"})


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
    assert pls_rules(pls_document(rules).encode()) == rules


def test_hostile_pls_files_are_refused_before_they_are_read() -> None:
    laughs = (
        b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><lexicon>&b;</lexicon>'
    )
    with pytest.raises(RuleError, match="DOCTYPE"):
        pls_rules(laughs)
    with pytest.raises(RuleError, match="not a PLS"):
        pls_rules(b"<lexicon><lexeme>")
    with pytest.raises(RuleError, match="KB"):
        pls_rules(b"<lexicon>" + b" " * 300_000 + b"</lexicon>")
    with pytest.raises(RuleError, match="no <lexeme>"):
        pls_rules(b'<lexicon xmlns="http://www.w3.org/2005/01/pronunciation-lexicon"/>')


LEXEME = '<lexicon version="1.0" alphabet="ipa"><lexeme><grapheme>x</grapheme><alias>{alias}</alias></lexeme></lexicon>'


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-8-sig"])
def test_a_doctype_in_any_encoding_is_refused_and_the_same_lexicon_without_one_is_read(encoding: str) -> None:
    """Issue #64: a UTF-16 file with a DOCTYPE passed the byte search for "<!DOCTYPE"; a 5-level nest of
    entities expanded to 1.8 MB and an entity-built alias was stored. The file is decoded first."""
    entities = '<!DOCTYPE lexicon [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
    declared = f'<?xml version="1.0" encoding="{encoding.replace("-sig", "").upper()}"?>'
    hostile = declared + entities + LEXEME.format(alias="&b;")
    with pytest.raises(RuleError, match="DOCTYPE"):
        pls_rules(hostile.encode(encoding))
    plain = declared + LEXEME.format(alias="why")
    assert pls_rules(plain.encode(encoding)) == [{"type": "alias", "string_to_replace": "x", "alias": "why"}]


def test_a_pls_in_an_encoding_that_hides_markup_is_refused_with_what_to_send() -> None:
    """UTF-7 writes "<" as "+ADw-": it was a 500; now a refusal that says to send UTF-8."""
    seven = ('<?xml version="1.0" encoding="UTF-7"?>' + LEXEME.format(alias="why")).encode("utf-7")
    with pytest.raises(RuleError, match="send it as UTF-8"):
        pls_rules(seven)


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
