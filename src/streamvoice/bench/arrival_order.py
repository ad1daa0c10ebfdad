"""The baseline the deadline scheduler is measured against (``bench.capacity``'s ``fifo``): model jobs in
arrival order. The server ships only the deadline order; this is composed here, over its parts."""

from __future__ import annotations

from streamvoice.server.core.scheduler import SynthesisScheduler
from streamvoice.server.core.service import SpeechService
from streamvoice.server.core.window_sizing import LARGEST_WINDOW_FRAMES, WindowCost

FIFO_SHARED_WINDOW_FRAMES = 24  # arrival order knows no deadlines: a fixed window while others wait


class ArrivalOrder(SynthesisScheduler):
    """The baseline the deadline scheduler is measured against: model jobs in arrival order (a job that hands
    its worker back between windows keeps its arrival key, so it stays first), the largest window when nobody
    waits and a fixed one when someone does. The server ships only the deadline order; this is composed here."""

    def order_key(self, deadline: float | None, now: float) -> float:
        return now

    def requeue_key(self, key: float, deadline: float) -> float:
        return key

    @staticmethod
    def window_cap(
        cost: WindowCost,
        own_s: float,
        waiting_s: float | None,
        listeners: int,
        overloaded: bool,
        batched: bool,
    ) -> int:
        return LARGEST_WINDOW_FRAMES if waiting_s is None else FIFO_SHARED_WINDOW_FRAMES


def use_arrival_order(service: SpeechService) -> None:
    """Swap a started server's scheduler for the arrival-order baseline (nothing is queued at the swap)."""
    shipped = service.scheduler
    service.scheduler = ArrivalOrder(workers=shipped.workers)
    service.scheduler.start()
    shipped.stop()
