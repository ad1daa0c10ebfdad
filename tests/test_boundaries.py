"""``text.boundaries``: where speech may be cut, from a bounded lookahead: sentence ends (not abbreviations,
titles or list markers), clause breaks, CJK stops."""

from __future__ import annotations

from streamvoice.text.boundaries import clause_cuts, ends_sentence, sentence_cuts, word_cuts


def test_a_sentence_ends_at_a_stop_but_not_after_a_title_or_an_abbreviation() -> None:
    assert ends_sentence("Hello there.")
    assert not ends_sentence("Talk to Dr.") and not ends_sentence("e.g.")
    assert not ends_sentence("1.")  # a list marker


def test_sentence_cuts_and_what_is_left_to_decide() -> None:
    assert sentence_cuts("Hi there. How are you? Fine") == ([9, 22], 27)
    assert sentence_cuts("Mr. Smith went home. Then") == ([20], 25)
    assert sentence_cuts("你好。我很好！", final=True) == ([3, 7], 7)


def test_clause_and_word_cuts() -> None:
    assert clause_cuts("First, we go; then — we stop.") == [6, 13, 21]
    assert word_cuts("a bc def") == [1, 4]
