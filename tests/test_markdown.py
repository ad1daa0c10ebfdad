"""``text.markdown``: the markdown an LLM emits, cleaned to speakable text one token at a time."""

from __future__ import annotations

from streamvoice.text.markdown import clean_token


def test_emphasis_links_and_markers_are_dropped_and_words_kept() -> None:
    assert clean_token("**bold**", line_start=False) == "bold"
    assert clean_token("[link](http://x.y)", line_start=False) == "link"
    assert clean_token("snake_case", line_start=False) == "snake_case"  # inside a word it is a word


def test_headings_and_bullets_go_only_at_the_start_of_a_line() -> None:
    assert clean_token("#", line_start=True) == ""
    assert clean_token("-", line_start=True) == ""
    assert clean_token("-", line_start=False) == "-"
