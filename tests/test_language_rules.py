"""``text.language_rules``: the one face that says which value rules read which language."""

from __future__ import annotations

from streamvoice.text.language_rules import language_rules


def test_each_language_family_has_its_rules_and_an_unknown_one_none() -> None:
    for lang in ("es", "fr-fr", "it", "pt-br", "ja", "cmn", "hi"):
        assert language_rules(lang), lang
    assert language_rules("xx") == ()
    assert language_rules("ja") is language_rules("ja")  # built once per language
