"""Who says what in ``bench.served_quality``: the listener counts it runs, and that every listener says every
(voice, sentence) while listeners at once say different things."""

from __future__ import annotations

import pytest

from streamvoice.bench import served_quality as sq
from streamvoice.bench.quality import SENTENCES, VOICES


def test_listener_counts_read_numbers_and_the_measured_capacity() -> None:
    assert sq.listener_counts("1,capacity,2xcapacity", 3) == [1, 3, 6]
    assert sq.listener_counts(" 2 , 0.5xcapacity,", 5) == [2, 2]
    assert sq.listener_counts("0.1xcapacity", 2) == [1]  # never no listener at all


def test_a_count_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValueError):
        sq.listener_counts("many", 2)


def test_every_listener_says_every_pair_and_neighbours_start_apart() -> None:
    every = {(voice, text) for voice in VOICES for text in SENTENCES}
    firsts = []
    for i in range(len(VOICES) + 1):
        pairs = sq.listener_pairs(i)
        assert len(pairs) == len(every) and set(pairs) == every
        firsts.append(pairs[0])
    assert len(set(firsts[: len(VOICES)])) == len(VOICES)  # listeners at once start in different voices
    assert firsts[len(VOICES)] == firsts[0]  # and the rotation wraps
