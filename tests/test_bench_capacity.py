"""The capacity benchmark's verdicts: who counts as fed, and what a repeated K reports."""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import pytest

from streamvoice.bench.capacity_runs import kept_fed, repeats, summarise
from streamvoice.bench.co_tenant import co_tenant


def _listener(heard_s: float | None, stalls_s: float, **extra: Any) -> dict[str, Any]:
    return {"heard_s": heard_s, "starvation_s": stalls_s, "refused": False, "told_s": None, **extra}


def test_a_listener_is_fed_when_heard_within_a_second_with_at_most_100_ms_of_stalls() -> None:
    row = summarise(
        "deadline",
        3,
        [_listener(0.8, 0.05), _listener(1.2, 0.0), _listener(0.7, 0.2)],
    )
    assert row["fed"] == 1
    assert row["all_fed"] is False
    assert row["stall_max_ms"] == pytest.approx(200.0)
    assert row["stall_sum_ms"] == pytest.approx(250.0)


def test_queued_and_refused_listeners_are_not_counted_as_admitted() -> None:
    row = summarise(
        "admission",
        3,
        [
            _listener(0.8, 0.0),
            _listener(5.0, 0.0, queued=True, told_s=0.004),
            {**_listener(None, 0.0), "refused": True, "told_s": 0.002},
        ],
    )
    assert (row["admitted"], row["queued"], row["refused"]) == (1, 1, 1)
    assert row["all_fed"] is True
    assert row["told_max_ms"] == pytest.approx(4.0)


def test_a_k_counts_as_kept_fed_only_when_every_run_of_it_was() -> None:
    def row(k: int, run: int, fed: bool) -> dict[str, Any]:
        return {"option": "deadline", "k": k, "run": run, "admitted": k, "all_fed": fed, "stall_sum_ms": 0.0}

    rows = [row(1, 0, True), row(1, 1, True), row(2, 0, True), row(2, 1, False)]
    assert kept_fed(rows, "deadline") == 1
    assert kept_fed(rows, "fifo") == 0
    summary = {(r["option"], r["k"]): r for r in repeats(rows)}
    assert summary[("deadline", 2)]["runs"] == 2
    assert summary[("deadline", 2)]["fed_runs"] == 1


def test_the_co_tenant_runs_while_the_block_runs_and_stops_after() -> None:
    with pytest.raises(ValueError, match="fraction of one core"), co_tenant(1.5):
        pass
    with co_tenant(0.0):
        assert not multiprocessing.active_children()
    with co_tenant(0.5):
        (child,) = multiprocessing.active_children()
        time.sleep(0.3)
        assert child.is_alive()
    assert not child.is_alive()


def test_the_noisy_neighbour_bench_finds_the_longest_silence_before_the_listener_was_told() -> None:
    from streamvoice.bench.noisy_neighbour import silences

    assert silences([(0, 5), (5, 12)], 10) == (0.0, None)  # playing when told
    assert silences([(0, 5), (6, 12)], None) == (1, 5)
    assert silences([(0, 5), (8, 12)], 7) == (2, 5)  # the wait is counted up to when it was told
    assert silences([(0, 5)], 9) == (4, 5)  # it had run dry


def test_the_arrival_order_baseline_shares_a_fixed_window_while_others_wait() -> None:
    from streamvoice.bench.arrival_order import FIFO_SHARED_WINDOW_FRAMES, ArrivalOrder
    from streamvoice.server.core.window_sizing import LARGEST_WINDOW_FRAMES, WindowCost

    baseline, cost = ArrivalOrder(), WindowCost(rtf=0.33)
    alone = baseline.window_cap(cost, own_s=5.0, waiting_s=None, listeners=1, overloaded=False, batched=False)
    shared = baseline.window_cap(cost, own_s=5.0, waiting_s=0.1, listeners=2, overloaded=True, batched=False)
    assert (alone, shared) == (LARGEST_WINDOW_FRAMES, FIFO_SHARED_WINDOW_FRAMES)
    assert baseline.order_key(deadline=5.0, now=1.0) == 1.0 and baseline.requeue_key(1.0, deadline=9.0) == 1.0
