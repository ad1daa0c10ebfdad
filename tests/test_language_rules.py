"""``text.language_rules``: the one face that says which language's value rules read which language."""

from __future__ import annotations

from streamvoice.text.language_rules import language_rules
from streamvoice.text.languages import english


def test_each_language_family_has_its_rules_and_an_unknown_one_none() -> None:
    for lang in ("es", "fr-fr", "it", "pt-br", "ja", "cmn", "hi"):
        found = language_rules(lang)
        assert found is not None and found.rules, lang
    assert language_rules("xx") is None
    assert language_rules("ja") is language_rules("ja")  # built once per language


def test_english_is_a_language_like_the_others_american_or_british() -> None:
    assert language_rules("en-us") is english.AMERICAN
    assert language_rules("en-gb") is english.BRITISH
