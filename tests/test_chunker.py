"""The incremental chunker: good boundaries, markdown cleaning, length policy, and fragmentation invariance."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamvoice import IncrementalSentenceChunker
from streamvoice.text.chunker import (
    FAST_FIRST,
    ChunkPolicy,
    chunk_text,
    estimate_tokens,
    normalize_text,
)
from tests.helpers import (
    WORDS,
    cpu_seconds,
)

NO_MIN = ChunkPolicy(min_tokens=(0,))


def pieces(text: str, policy: ChunkPolicy = NO_MIN) -> list[str]:
    return chunk_text(text, policy)


def test_feed_holds_back_until_a_sentence_is_complete() -> None:
    c = IncrementalSentenceChunker(NO_MIN)
    assert c.feed("Hello there") == []
    assert c.feed(". How") == []  # "3." or "Dr." would not end a sentence: wait for the next word
    assert c.feed(" are") == ["Hello there."]
    assert c.feed(" you") == []
    assert c.flush() == ["How are you"]  # a stream that ends without punctuation loses nothing


def test_abbreviations_and_titles_do_not_end_sentences() -> None:
    text = "Dr. Smith met Mr. Jones at 5 p.m. today. They discussed e.g. budgets, i.e. money, etc. and more. The U.S. Army agreed."
    assert pieces(text) == [
        "Dr. Smith met Mr. Jones at 5 p.m. today.",
        "They discussed e.g. budgets, i.e. money, etc. and more.",
        "The U.S. Army agreed.",
    ]


def test_decimals_versions_urls_and_emails_stay_whole() -> None:
    text = "Pi is 3.14 and v2.1 shipped. See https://example.com/a.b?x=1 or mail a.b@c.org now. Done."
    assert pieces(text) == [
        "Pi is 3.14 and v2.1 shipped.",
        "See https://example.com/a.b?x=1 or mail a.b@c.org now.",
        "Done.",
    ]


def test_ellipses_quotes_and_brackets() -> None:
    text = 'Well... maybe not. He said "stop." Then left (quickly.) Next one? Yes!'
    assert pieces(text) == [
        "Well... maybe not.",
        'He said "stop."',
        "Then left (quickly.)",
        "Next one?",
        "Yes!",
    ]


def test_lists_newlines_and_markdown_are_cleaned() -> None:
    text = (
        "# Steps to follow\n\n1. Open the **door** carefully.\n2. Walk `inside` the room.\n"
        "- Read [the guide](https://x.y/z) first.\n* Then _relax_.\n"
    )
    assert pieces(text) == [
        "Steps to follow",
        "1. Open the door carefully.",
        "2. Walk inside the room.",
        "Read the guide first.",
        "Then relax.",
    ]


def test_cjk_stops_cut_without_spaces() -> None:
    assert pieces("你好。今天天气很好！我们走吧？好") == ["你好。", "今天天气很好！", "我们走吧？", "好"]


def test_short_pieces_merge_with_the_next() -> None:
    policy = ChunkPolicy(min_tokens=(20,))
    assert pieces("Yes. Sure. That is a complete and long enough sentence.", policy) == [
        "Yes. Sure. That is a complete and long enough sentence."
    ]


def test_long_sentences_split_at_clauses_within_max() -> None:
    sentence = ", ".join(f"clause number {i} goes here" for i in range(40)) + "."
    policy = ChunkPolicy(min_tokens=(0,), max_tokens=120)
    out = pieces(sentence, policy)
    assert len(out) > 3 and all(estimate_tokens(p) <= 120 for p in out)
    assert all(p.endswith(",") for p in out[:-1])


def test_fast_first_piece_ends_at_a_clause_or_phrase() -> None:
    text = "The sky looks blue because air scatters blue light more, and red light less. Sunsets look red."
    out = pieces(text, FAST_FIRST)
    assert out[0] == "The sky looks blue"
    assert " ".join(out) == normalize_text(text)
    plain = pieces(text, ChunkPolicy())
    assert plain[0].startswith("The sky looks blue because")


def test_growing_minimum_schedule() -> None:
    text = " ".join(f"Sentence {i} is short." for i in range(12))
    out = pieces(text, ChunkPolicy(min_tokens=(1, 40, 80)))
    sizes = [estimate_tokens(p) for p in out]
    assert out[0] == "Sentence 0 is short."
    assert all(s >= 40 for s in sizes[1:-1])


ALPHABET = st.sampled_from(
    [
        *list("abcdefghij ABCDE  0123456789"),
        ".",
        ". ",
        "! ",
        "? ",
        ", ",
        "; ",
        "\n",
        "\n\n",
        "...",
        '"',
        ")",
        "(",
        "*",
        "**",
        "#",
        "- ",
        "`",
        "[",
        "]",
        "。",
        "！",
        "Dr. ",
        "e.g. ",
        "3.14",
        "v2.1",
        "https://a.b/c.d ",
        "x@y.com ",
        "1. ",
        "_",
        "because ",
        "and ",
    ]
)
TEXTS = st.lists(ALPHABET, max_size=80).map("".join)


@st.composite
def text_and_cuts(draw: st.DrawFn) -> tuple[str, list[str]]:
    text = draw(TEXTS)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    return text, [text[a:b] for a, b in itertools.pairwise(bounds)]


POLICIES = st.sampled_from(
    [
        NO_MIN,
        ChunkPolicy(),
        FAST_FIRST,
        ChunkPolicy(min_tokens=(5, 30), max_tokens=40),
        ChunkPolicy(clean_markdown=False),
    ]
)


@settings(max_examples=400, deadline=None)
@given(text_and_cuts(), POLICIES)
def test_any_fragmentation_gives_the_same_pieces_and_loses_nothing(
    case: tuple[str, list[str]], policy: ChunkPolicy
) -> None:
    text, fragments = case
    chunker = IncrementalSentenceChunker(policy)
    streamed: list[str] = []
    for fragment in fragments:
        streamed += chunker.feed(fragment)
    streamed += chunker.flush()
    assert streamed == chunk_text(text, policy)
    assert all(p and p == p.strip() for p in streamed)
    normalised = normalize_text(text, clean=policy.clean_markdown)
    # nothing lost, nothing duplicated, same order (whitespace aside: CJK pieces join without spaces)
    assert "".join(streamed).replace(" ", "") == normalised.replace(" ", "")


def test_cjk_and_hindi_marks_cut_pieces_however_the_text_arrives() -> None:
    from streamvoice.text.chunker import FAST_FIRST, IncrementalSentenceChunker, estimate_tokens

    text = "今天天气很好，我们去公园散步吧。然后一起吃晚饭，好不好？我很高兴。"
    whole = chunk_text(text, FAST_FIRST)
    assert whole[0] == "今天天气很好，" and whole[1] == "我们去公园散步吧。"  # a clause mark cuts the first
    chunker = IncrementalSentenceChunker(FAST_FIRST)
    streamed = [p for ch in text for p in chunker.feed(ch)] + chunker.flush()
    assert streamed == whole
    hindi = chunk_text("नमस्ते, आप कैसे हैं? आज मौसम बहुत अच्छा है। मैं बाज़ार जा रहा हूँ।")
    assert hindi == ["नमस्ते, आप कैसे हैं?", "आज मौसम बहुत अच्छा है।", "मैं बाज़ार जा रहा हूँ।"]
    assert estimate_tokens("漢" * 200) >= 300  # 200 kanji are a long piece, not a short one
    assert all(estimate_tokens(p) <= 300 for p in chunk_text("漢字。" * 400))


def test_quiet_releases_a_finished_sentence_and_nothing_else() -> None:
    from streamvoice.text.chunker import FAST_FIRST, IncrementalSentenceChunker

    def fed_then_quiet(text: str) -> tuple[list[str], list[str]]:
        chunker = IncrementalSentenceChunker(FAST_FIRST)
        fed = [p for word in text.split(" ") for p in chunker.feed(word + " ")]
        return fed, chunker.quiet()

    reply = "I can book a table for four people at seven thirty this evening."
    assert fed_then_quiet(reply) == ([], [reply])  # before: nothing until the stream ended
    assert fed_then_quiet("Is that all?")[1] == ["Is that all?"]
    assert fed_then_quiet("Short.")[1] == ["Short."]  # however short: it is all there is for now
    for unfinished in ("Please call Dr.", "It costs 3.", "Ask for J.", "The table for four people at"):
        assert fed_then_quiet(unfinished)[1] == [], unfinished
    chunker = IncrementalSentenceChunker(FAST_FIRST)
    chunker.feed("Sure. ")
    assert chunker.quiet() == ["Sure."]
    assert chunker.feed("Anything else? ") + chunker.flush() == ["Anything else?"]  # nothing said twice


# --- 20. Wyoming text is capped and chunked in bounded time -------------------------------------------------


def _chunked(fragments: list[str]) -> list[str]:
    chunker = IncrementalSentenceChunker(FAST_FIRST)
    return [p for f in fragments for p in chunker.feed(f)] + chunker.flush()


@pytest.mark.parametrize(
    "fragments",
    [[WORDS[:100_000]], ["x"] * 20_000],
    ids=["100 KB at once", "20k characters without a space, one by one"],
)
def test_chunker_work_per_character_is_bounded(fragments: list[str]) -> None:
    """Ten times the text costs about ten times the work, not a hundred (it took 4 s and 21 s)."""
    pieces = _chunked(fragments)
    assert "".join(pieces).replace(" ", "") == "".join(fragments).replace(" ", "")
    tenth = fragments[: max(1, len(fragments) // 10)] if len(fragments) > 1 else [fragments[0][:10_000]]
    small = cpu_seconds(lambda: _chunked(tenth))
    large = cpu_seconds(lambda: _chunked(fragments))
    assert large < 30 * max(small, 1e-3), (small, large)


# --- 4. planning ----------------------------------------------------------------------------------------


def test_planning_without_sentence_ends_is_near_linear() -> None:
    from streamvoice.engine.planning import MESSAGE_POLICY

    small, large = "word " * 400, "word " * 2000
    assert " ".join(chunk_text(large, MESSAGE_POLICY)).split() == large.split()
    # 5x the text: well under 25x the work (the quadratic cut search took 7 s for 10k characters)
    t_small = cpu_seconds(lambda: chunk_text(small, MESSAGE_POLICY))
    t_large = cpu_seconds(lambda: chunk_text(large, MESSAGE_POLICY))
    assert t_large < 12 * max(t_small, 1e-4), (t_small, t_large)
