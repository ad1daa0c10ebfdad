"""The decode batcher's grouping: rows of one shape meet in one call, each gets its own outputs back, a lone
window never waits, and a failed call fails every row it carried. The model here is a numpy function (the
batcher only stacks and splits arrays); ``test_batching.py`` runs the real decoder."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from streamvoice.engine.streaming.decode_batcher import DecodeBatcher, Feeds, Outputs, split_rows, stack_rows


class Recorder:
    """A model call that doubles its input and records the batch sizes it was given."""

    def __init__(self) -> None:
        self.batches: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, feeds: Feeds) -> Outputs:
        with self.lock:
            self.batches.append(int(feeds["x"].shape[0]))
        return [feeds["x"] * 2.0, feeds["x"].sum(axis=(1, 2), keepdims=True)]


def rows_at_once(batcher: DecodeBatcher, feeds: list[tuple[Feeds, Any]]) -> list[Outputs]:
    results: list[Outputs | None] = [None] * len(feeds)

    def one(i: int) -> None:
        results[i] = batcher.decode(*feeds[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(feeds))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(r is not None for r in results)
    return [r for r in results if r is not None]


def row(value: float, length: int = 5) -> Feeds:
    return {"x": np.full((1, 3, length), value, dtype=np.float32), "prior": np.zeros((1, 1, 1), np.float32)}


def test_stacking_broadcasts_placeholders_and_splitting_gives_each_row_back() -> None:
    a = {"p": np.zeros((1, 1, 1), np.float32), "x": np.ones((1, 2, 4), np.float32)}
    b = {"p": np.arange(3, dtype=np.float32).reshape(1, 3, 1), "x": np.full((1, 2, 4), 2, np.float32)}
    stacked = stack_rows([a, b])
    assert stacked["p"].shape == (2, 3, 1) and stacked["x"].shape == (2, 2, 4)
    assert np.array_equal(stacked["p"][1], b["p"][0]) and not stacked["p"][0].any()
    rows = split_rows([stacked["x"]], 2)
    assert [r[0].shape for r in rows] == [(1, 2, 4), (1, 2, 4)]
    assert np.array_equal(rows[1][0], b["x"])


def test_windows_of_one_size_share_a_call_and_each_gets_its_own_row() -> None:
    model = Recorder()
    batcher = DecodeBatcher(model, max_rows=3, linger_s=5.0, busy=lambda: 3)
    results = rows_at_once(batcher, [(row(float(v)), 5) for v in (1, 2, 3)])
    assert model.batches == [3]
    assert (batcher.calls, batcher.rows) == (1, 3)
    for value, outputs in zip((1, 2, 3), results, strict=True):
        assert outputs[0].shape == (1, 3, 5)
        assert np.all(outputs[0] == 2.0 * value)
        assert float(outputs[1].reshape(-1)[0]) == pytest.approx(15.0 * value)


def test_windows_of_different_sizes_are_not_stacked() -> None:
    model = Recorder()
    # Two workers busy, each with a different size: neither can get company, so each goes when the
    # other is inside the batcher too (nobody else may come).
    batcher = DecodeBatcher(model, max_rows=2, linger_s=5.0, busy=lambda: 2)
    results = rows_at_once(batcher, [(row(1.0, 5), 5), (row(2.0, 7), 7)])
    assert sorted(model.batches) == [1, 1]
    assert results[0][0].shape == (1, 3, 5) and results[1][0].shape == (1, 3, 7)


def test_a_window_alone_on_the_server_does_not_wait() -> None:
    # lingering for company would take ten minutes: done within the join's generous minute means it did not
    batcher = DecodeBatcher(Recorder(), max_rows=4, linger_s=600.0, busy=lambda: 1)
    alone = threading.Thread(target=batcher.decode, args=(row(1.0), 5), daemon=True)
    alone.start()
    alone.join(60)
    assert not alone.is_alive() and batcher.calls == 1


def test_a_batch_holds_at_most_max_rows() -> None:
    model = Recorder()
    batcher = DecodeBatcher(model, max_rows=2, linger_s=5.0, busy=lambda: 4)
    rows_at_once(batcher, [(row(float(v)), 5) for v in range(4)])
    assert sorted(model.batches) == [2, 2]


def test_a_failed_call_fails_every_row_it_carried() -> None:
    def broken(feeds: Feeds) -> Outputs:
        raise RuntimeError("decoder failed")

    batcher = DecodeBatcher(broken, max_rows=2, linger_s=5.0, busy=lambda: 2)
    errors: list[BaseException] = []

    def one(v: float) -> None:
        try:
            batcher.decode(row(v), 5)
        except RuntimeError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(v,)) for v in (1.0, 2.0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [str(e) for e in errors] == ["decoder failed", "decoder failed"]
