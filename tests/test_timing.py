"""Speech spans, trimming, word times and pauses, on synthetic durations and audio (pure)."""

from __future__ import annotations

import numpy as np
import pytest

from streamvoice.engine.alignment import WordSpan
from streamvoice.engine.planning import pause_after
from streamvoice.engine.timing import (
    LEAD_FRAMES,
    LEAD_MARGIN_MS,
    RELEASE_MS,
    SOUND_LEAD_MS,
    TAIL_FRAMES,
    TrimmedPiece,
    decode_range,
    pause_samples,
    trim_whole,
    word_times,
)
from streamvoice.protocol import Pauses
from streamvoice.text.chunker import chunk_paragraphs
from tests.test_levels import silence, tone


def test_decode_range_skips_the_models_silences() -> None:
    durations = np.array([14, 2, 3, 2, 5, 7, 1])  # pad, "a", "b", " ", "c", ".", pad
    assert decode_range(durations, (0, 4), 34) == (
        14 - LEAD_FRAMES,
        14 + 12 + TAIL_FRAMES,
    )  # pad, voiced, a few more
    assert decode_range(None, (0, 4), 34) == (0, 34)  # an export without durations: everything


def test_word_times_count_from_the_first_kept_sample() -> None:
    durations = np.array([10, 2, 2, 2, 4, 1])  # pad, "a", "b", " ", "c", pad
    spans = (WordSpan("ab", 0, 2), WordSpan("c", 3, 4))
    times = word_times(spans, durations, start_sample=8 * 600, length=24_000)
    lead = SOUND_LEAD_MS
    assert [(t.start_ms, t.end_ms) for t in times] == [(50 - lead, 150 - lead), (200 - lead, 300 - lead)]
    coarse = word_times(spans, None, 0, 12_000)
    assert len(coarse) == 1 and coarse[0].word == "ab c" and coarse[0].end_ms == 500.0


def test_trimmed_piece_cuts_silence_and_reports_its_start() -> None:
    chunks = [(silence(200), False), (np.concatenate([silence(100), tone(300)]), False)]
    chunks.append((np.concatenate([tone(200), silence(400)]), True))
    starts: list[int] = []
    out = np.concatenate(list(TrimmedPiece(iter(chunks), 1000, starts.append)))
    lead = int(24 * LEAD_MARGIN_MS)
    assert starts == [1000 + 24 * 300 - lead]  # model sample where the kept audio starts
    assert len(out) == lead + 24 * 500 + int(24 * RELEASE_MS)
    whole, first = trim_whole(np.concatenate([c for c, _ in chunks]), 1000)
    assert first == starts[0] and len(whole) == len(out)


@pytest.mark.parametrize("silent_chunks", [[200], [10, 200], [10, 10, 10, 200]])
def test_a_release_that_starts_at_a_chunk_end_goes_on_in_the_chunks_after(silent_chunks: list[int]) -> None:
    # The sound lasts to the end of one window and decays in the next ones, which are all below the threshold.
    chunks = [(tone(300), False)] + [
        (silence(ms), i == len(silent_chunks) - 1) for i, ms in enumerate(silent_chunks)
    ]
    out = np.concatenate(list(TrimmedPiece(iter(chunks), 0)))
    assert len(out) == 24 * 300 + int(24 * RELEASE_MS)
    whole, _ = trim_whole(np.concatenate([c for c, _ in chunks]))
    assert len(whole) == len(out)


def test_pause_after_follows_the_punctuation() -> None:
    assert pause_after("Hello there") == "none"
    assert pause_after("Hello there,") == "clause"
    assert pause_after('He said "stop."') == "sentence"
    assert pause_after("Done", paragraph_end=True) == "paragraph"
    pauses = Pauses(clause_ms=100, sentence_ms=300, paragraph_ms=500)
    lengths = [len(pause_samples(k, pauses)) for k in ("none", "clause", "sentence", "paragraph")]
    assert lengths == [
        0,
        24 * (100 - int(RELEASE_MS)),
        24 * (300 - int(RELEASE_MS)),
        24 * (500 - int(RELEASE_MS)),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("One. Two.\n\nThree.", [("One.", False), ("Two.", True), ("Three.", False)]),
        ("Title\n\n\nBody text.\n\n", [("Title", True), ("Body text.", True)]),
        ("A line\nand the next.", [("A line", False), ("and the next.", False)]),
    ],
)
def test_no_chunk_spans_a_paragraph_break(text: str, expected: list[tuple[str, bool]]) -> None:
    from streamvoice.engine.planning import MESSAGE_POLICY

    assert chunk_paragraphs(text, MESSAGE_POLICY) == expected
