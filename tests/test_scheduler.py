"""The deadline scheduler: ordering, requeueing between turns, cancelling; and that its policy is its methods
(``bench.capacity``'s arrival-order baseline is a subclass)."""

from __future__ import annotations

import asyncio
import threading
import time

from streamvoice.bench.arrival_order import ArrivalOrder
from streamvoice.server.core.scheduler import Requeue, SynthesisScheduler


async def _order_of(scheduler: SynthesisScheduler) -> list[str]:
    gate = threading.Event()
    order: list[str] = []
    blocker = scheduler.submit(lambda: gate.wait(5), deadline=0.0)
    scheduler.start()
    await asyncio.sleep(0.05)  # the worker is inside the blocker; the rest queue behind it
    now = time.monotonic()
    jobs = [
        scheduler.submit(lambda n=name: order.append(n), deadline=now + offset)  # type: ignore[misc]
        for name, offset in (("later", 3.0), ("soon", 1.0), ("urgent", 0.0))
    ]
    gate.set()
    await asyncio.gather(blocker, *jobs)
    scheduler.stop()
    return order


async def test_deadline_runs_the_most_urgent_first_and_fifo_runs_in_arrival_order() -> None:
    assert await _order_of(SynthesisScheduler(workers=1)) == ["urgent", "soon", "later"]
    assert await _order_of(ArrivalOrder(workers=1)) == ["later", "soon", "urgent"]


async def test_a_requeued_job_yields_to_a_more_urgent_one_between_turns() -> None:
    scheduler = SynthesisScheduler(workers=1)
    ran: list[str] = []
    turns = iter(range(4))

    def long_job() -> int | Requeue:
        ran.append("long")
        time.sleep(0.1)  # one window's worth of decoding
        if next(turns) < 3:
            return Requeue(time.monotonic() + 10)  # its next window is not due for a while
        return 1

    scheduler.start()
    long = scheduler.submit(long_job, deadline=0.0)
    await asyncio.sleep(0.15)
    short = scheduler.submit(lambda: ran.append("new") or 2, deadline=time.monotonic())
    assert await asyncio.wait_for(short, 5) == 2 and await asyncio.wait_for(long, 5) == 1
    scheduler.stop()
    assert ran.index("new") < len(ran) - 1  # the newcomer went between the long job's turns


async def test_a_cancelled_job_is_skipped_and_stop_cancels_the_queue() -> None:
    scheduler = SynthesisScheduler(workers=1)
    ran: list[str] = []
    skipped = scheduler.submit(lambda: ran.append("skipped"))
    skipped.cancel()
    scheduler.start()
    assert await asyncio.wait_for(scheduler.submit(lambda: "ok"), 5) == "ok"
    assert ran == []
    scheduler.stop()
    late = scheduler.submit(lambda: "never")
    assert isinstance(late.exception(), RuntimeError)
