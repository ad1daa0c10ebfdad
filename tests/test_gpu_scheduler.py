"""The GPU scheduler's policy on a scripted runner: earliest deadline first, rows of the urgent row's token
bucket batched together up to the cap, every waiter answered (its result or the batch's failure)."""

from __future__ import annotations

import threading

import pytest

from streamvoice.engine.torch_kokoro.scheduler import GpuScheduler, Pending, next_batch

BUCKETS = (32, 64, 128)


def pending(deadline: float, arrival: int, tokens: int) -> Pending[str, str]:
    return Pending(deadline, arrival, f"row{arrival}", tokens)


def test_the_earliest_deadline_goes_first_then_arrival() -> None:
    rows = [pending(5.0, 0, 10), pending(1.0, 1, 10), pending(1.0, 2, 10), pending(0.5, 3, 10)]
    assert [p.row for p in next_batch(rows, 8, BUCKETS)] == ["row3", "row1", "row2", "row0"]


def test_a_batch_holds_the_urgent_rows_token_bucket_only_and_respects_the_cap() -> None:
    rows = [pending(1.0, 0, 100), pending(0.1, 1, 20), pending(0.2, 2, 30), pending(0.3, 3, 40)]
    assert [p.row for p in next_batch(rows, 8, BUCKETS)] == ["row1", "row2"]  # 20 and 30 share bucket 32
    many = [pending(float(i), i, 10) for i in range(10)]
    assert [p.row for p in next_batch(many, 4, BUCKETS)] == ["row0", "row1", "row2", "row3"]
    assert next_batch([], 4, BUCKETS) == []


def test_rows_arriving_while_the_gpu_is_busy_are_batched_in_deadline_order() -> None:
    batches: list[list[str]] = []
    busy = threading.Event()
    release = threading.Event()

    def run(rows: list[str]) -> list[str]:
        batches.append(rows)
        if len(batches) == 1:
            busy.set()
            release.wait(10)
        return [r.upper() for r in rows]

    with GpuScheduler(run, max_rows=8, buckets=BUCKETS) as scheduler:
        first = scheduler.submit("a", 10, deadline=10.0)
        assert busy.wait(10)
        later = [scheduler.submit(r, 10, deadline=d) for r, d in (("b", 3.0), ("c", 1.0), ("d", 2.0))]
        release.set()
        assert first.result(10) == "A"
        assert [f.result(10) for f in later] == ["B", "C", "D"]
    assert batches == [["a"], ["c", "d", "b"]]


def test_a_failed_batch_fails_each_of_its_waiters_and_the_next_batch_still_runs() -> None:
    def run(rows: list[str]) -> list[str]:
        if "bad" in rows:
            raise RuntimeError("the GPU call failed")
        return rows

    with GpuScheduler(run, max_rows=1, buckets=BUCKETS) as scheduler:
        with pytest.raises(RuntimeError, match="GPU call failed"):
            scheduler.speak("bad", 10, deadline=0.0)
        assert scheduler.speak("good", 10, deadline=0.0) == "good"
    with pytest.raises(RuntimeError, match="closed"):
        scheduler.submit("late", 10, deadline=0.0)
