"""`text.dictionary_rules`: phonemes in either alphabet, PLS lexemes in and out, hostile PLS files refused."""

from __future__ import annotations

import pytest

from streamvoice.text.dictionary_rules import (
    Lexeme,
    RuleError,
    arpabet_to_kokoro,
    lexicon_of,
    pls_document,
    pls_lexemes,
    said_phonemes,
)


def test_arpabet_in_the_voices_symbols_with_stress_before_the_vowel() -> None:
    assert arpabet_to_kokoro("T AH0 M EY1 T OW2") == "təmˈAtˌO"
    assert arpabet_to_kokoro("b ah1 t er0") == "bˈʌtəɹ"  # any case; ER0 reduced
    for bad in ("T AH9 X", "QQ", ""):
        with pytest.raises(RuleError):
            arpabet_to_kokoro(bad)


def test_hostile_pls_files_are_refused_before_they_are_read() -> None:
    laughs = (
        b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><lexicon>&b;</lexicon>'
    )
    with pytest.raises(RuleError, match="DOCTYPE"):
        pls_lexemes(laughs)
    with pytest.raises(RuleError, match="not a PLS"):
        pls_lexemes(b"<lexicon><lexeme>")
    with pytest.raises(RuleError, match="KB"):
        pls_lexemes(b"<lexicon>" + b" " * 300_000 + b"</lexicon>")
    with pytest.raises(RuleError, match="no <lexeme>"):
        pls_lexemes(b'<lexicon xmlns="http://www.w3.org/2005/01/pronunciation-lexicon"/>')


LEXEME = '<lexicon version="1.0" alphabet="ipa"><lexeme><grapheme>x</grapheme><alias>{alias}</alias></lexeme></lexicon>'


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-8-sig"])
def test_a_doctype_in_any_encoding_is_refused_and_the_same_lexicon_without_one_is_read(encoding: str) -> None:
    """Issue #64: a UTF-16 file with a DOCTYPE passed the byte search for "<!DOCTYPE"; a 5-level nest of
    entities expanded to 1.8 MB and an entity-built alias was stored. The file is decoded first."""
    entities = '<!DOCTYPE lexicon [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
    declared = f'<?xml version="1.0" encoding="{encoding.replace("-sig", "").upper()}"?>'
    hostile = declared + entities + LEXEME.format(alias="&b;")
    with pytest.raises(RuleError, match="DOCTYPE"):
        pls_lexemes(hostile.encode(encoding))
    plain = declared + LEXEME.format(alias="why")
    assert pls_lexemes(plain.encode(encoding)) == [Lexeme("x", alias="why")]


def test_a_pls_in_an_encoding_that_hides_markup_is_refused_with_what_to_send() -> None:
    """UTF-7 writes "<" as "+ADw-": it was a 500; now a refusal that says to send UTF-8."""
    seven = ('<?xml version="1.0" encoding="UTF-7"?>' + LEXEME.format(alias="why")).encode("utf-7")
    with pytest.raises(RuleError, match="send it as UTF-8"):
        pls_lexemes(seven)


def test_pls_round_trip_keeps_every_lexeme() -> None:
    lexemes = [
        Lexeme("UN", alias="United Nations"),
        Lexeme("tomato", phoneme="təˈmeɪtoʊ", alphabet="ipa"),
        Lexeme("butter", phoneme="B AH1 T ER0", alphabet="cmu-arpabet"),
    ]
    assert pls_lexemes(pls_document(lexemes).encode()) == lexemes


def test_phonemes_in_either_alphabet_or_a_refusal_that_names_both() -> None:
    assert said_phonemes("təˈmeɪtoʊ", "ipa") == "/təˈmAtO/"
    assert said_phonemes("T AH0 M EY1 T OW2", "cmu-arpabet") == "/təmˈAtˌO/"
    with pytest.raises(RuleError, match="cmu-arpabet"):
        said_phonemes("a", "x-sampa")
    assert lexicon_of([("w", "said")], lambda pair: pair) == {"w": "said"}  # type: ignore[arg-type,return-value]
