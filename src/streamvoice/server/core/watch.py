"""Noticing a slowdown within a second, and protecting whoever was admitted first.

Admission measures the machine and trusts the measure; a shared machine changes speed under a running call
(another process takes the CPU). This watch looks, every ``period_s``, at the listeners holding slots whose
lanes have work: how long each has before it goes silent for want of decoding (``Lane.margin_s``: the audio
decoded ahead of its playback). While the machine keeps them fed the deadline scheduler keeps every margin
above a second. When one falls under its threshold and stays there for ``confirm_s``, the machine no longer
feeds them all: the newest admitted listener with work is shed (its answers end ``server_busy`` in its
wire's own shape, with a retry hint the server can keep), so the others, whose buffers still hold audio,
never go silent; and admission holds at most the listeners left for ``hold_s``, telling newcomers at once.
Who is shed is whoever costs the machine most past its share, before the newest: a listener whose text
costs more than admission counted (a chain of 9,000 hyphen-joined digits: small pieces, a front call each)
once had its ordinary neighbour, admitted a second later, shed in its place. A lane's recent model time
(``Lane.cost``) over ``over_share`` times an equal share of the time all of them took marks it.
Shedding is the last resort: only when two or more listeners have work, ``cooldown_s`` apart; logged (with
its reason) and counted (``streamvoice_shed_listeners_total``).

The last windows show the machine slower than its measure within a window or two (``Load.pace``: their
cost over what the window-cost fit predicts). Where at that pace it feeds F listeners and W have work, each
buffer drains by d = 1 - F/W seconds a second. So: where F falls short of the established listeners, the F
oldest are kept and the rest shed together, while the first still have seconds in hand; and the margin
threshold itself is d x ``lead_s`` when that is above ``low_s``: the harder the slowdown, the earlier the
shed.

Degrading instead (larger, cheaper windows) is what the lanes already do when more listeners have work
than the measure says fit (``Load.overloaded``); it helps at the margin but a listener still stalls when
the machine gives half of what it did. Checked by ``pytest tests/test_watch.py``; measured by
``python -m streamvoice.bench.noisy_neighbour``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.admission import Admission
from streamvoice.server.core.lane import Lane
from streamvoice.server.core.listener import Listener
from streamvoice.server.core.load import Load
from streamvoice.server.core.metrics import Metrics

log = logging.getLogger("streamvoice.admission")


@dataclass
class Watch:
    admission: Admission[Listener]
    metrics: Metrics
    load: Load | None = None  # its pace raises the threshold in a slowdown (without: ``low_s`` alone)
    period_s: float = 0.2
    low_s: float = 0.6  # less decoded ahead than this, while its work waits: the listener is starving
    lead_s: float = 2.0  # in a slowdown, a buffer is judged this long before it would run dry
    pace_share: float = 0.9  # the pace says the machine feeds fewer than this share of those working
    confirm_s: float = 0.2  # starving at two looks in a row, not one (a window may land just after)
    first_window_s: float = 1.0  # what a piece's first window may take after a silence (the onset target)
    established_s: float = 2.0  # decoded this far past its start, a listener's buffer is its own to keep
    late_s: float = 0.5  # a listener not yet established starves once this late past its onset target
    cooldown_s: float = 1.5  # after a shed, the margins recover before the next judgement
    hold_s: float = 15.0  # admission holds no more than the listeners left, this long
    over_share: float = 1.5  # a listener whose recent model time passes this times an equal share goes first
    clock: Callable[[], float] = time.monotonic
    reason: str = field(default="", init=False)  # why the last shed was judged (logged with it)
    _starving_since: float | None = field(default=None, init=False)
    _calm_until: float = field(default=0.0, init=False)

    def check(self) -> list[Listener]:
        """One look: the listeners to shed now, newest first (none while the machine feeds them all)."""
        now = self.clock()
        working = [
            (who, lane)
            for who in self.admission.oldest_first()
            if (lane := who.lane) is not None and lane.has_work
        ]
        if len(working) < 2 or now < self._calm_until:
            self._starving_since = None
            return []
        keep = self._keep([lane for _, lane in working], now)
        if keep is None:
            self._starving_since = None
            return []
        if self._starving_since is None:
            self._starving_since = now
        if now - self._starving_since < self.confirm_s:
            return []
        self._starving_since = None
        self._calm_until = now + self.cooldown_s
        return self._chosen([who for who, _ in working], len(working) - keep, now)

    def _chosen(self, oldest_first: list[Listener], count: int, now: float) -> list[Listener]:
        """The ``count`` listeners to shed: those whose recent model time is past ``over_share`` times an
        equal share, costliest first, then the newest."""
        costs = {id(who): _cost(who, now) for who in oldest_first}
        share = sum(costs.values()) / len(oldest_first)
        over = sorted(
            (who for who in oldest_first if share > 0 and costs[id(who)] > self.over_share * share),
            key=lambda who: costs[id(who)],
            reverse=True,
        )
        if over:
            self.reason += f"; the costliest listener took {costs[id(over[0])] / share:.1f}x an equal share"
        newest = [who for who in reversed(oldest_first) if who not in over]
        return [*over, *newest][:count]

    def _keep(self, lanes: list[Lane], now: float) -> int | None:
        """How many of the listeners with work (oldest first) to keep, when fewer than all can be fed.

        At the present pace the machine feeds F listeners: where F is short of ``pace_share`` of the
        established ones, the F oldest are kept and the rest told at once, within a window or two of the
        slowdown and while the first still have seconds in hand (shed one by one, each as the first's buffer
        ran low, the first admitted went silent ~300 ms after the last). Admission counts 0.85 of the
        measure (less each listener's piece starts), so this takes a pace above ~1.3 (windows 30% dearer
        than measured); with two listeners and nothing else running it stayed within 0.8-1.1
        (``bench.noisy_neighbour --busy 0``: the logged reason of its sheds, at the start of two answers, was
        a buffer, not the pace). Else a buffer under its threshold sheds the newest."""
        established = sum(1 for lane in lanes if self._established(lane))
        if self.load is not None and established >= 2:
            feedable = self.load.feedable()
            if feedable < self.pace_share * established:
                self.reason = (
                    f"at pace {self.load.pace:.2f} it feeds {feedable:.2f} of {established} listeners"
                )
                return max(1, min(len(lanes) - 1, math.floor(feedable / self.pace_share)))
        low_s = self.threshold(len(lanes))
        if any(self._at_risk(lane, now, low_s) for lane in lanes):
            lowest = min(lane.margin_s(now, self.first_window_s) for lane in lanes)
            self.reason = f"a listener's buffer is down to {lowest:.2f} s (threshold {low_s:.2f} s)"
            return len(lanes) - 1
        return None

    def threshold(self, working: int) -> float:
        """The margin under which an established listener is starving, with ``working`` listeners fed."""
        if self.load is None or working < 1:
            return self.low_s
        drain = max(0.0, 1.0 - self.load.feedable() / working)  # seconds lost per second, per buffer
        return max(self.low_s, self.lead_s * drain)

    def _established(self, lane: Lane) -> bool:
        """Decoded ``established_s`` past its work's start: while a listener's first seconds are decoded its
        margin is small by nature (another's first window, due at once, goes ahead of it)."""
        return lane.play_end >= lane.ready_at + self.established_s

    def _at_risk(self, lane: Lane, now: float, low_s: float) -> bool:
        """Its listener is about to go silent for want of decoding: an established buffer under ``low_s``, or
        a fresh listener already ``late_s`` past its onset target."""
        margin = lane.margin_s(now, self.first_window_s)
        return margin < low_s if self._established(lane) else margin < -self.late_s

    def shed(self, who: Listener) -> None:
        left = self.admission.admitted - 1
        self.admission.lower(max(1, left), self.hold_s)
        error = ProtocolError(
            ErrorCode.SERVER_BUSY,
            f"the server slowed down and can no longer keep every listener fed; the ones admitted earlier "
            f"keep their speech unless one costs far more than its share. Retry in about {self.hold_s:g} s "
            "or on another instance",
        )
        log.warning("machine slowed down (%s): shedding a listener (%d left)", self.reason, left)
        self.metrics.shed += 1
        self.metrics.count_error("shed")
        who.shed(error)
        self.admission.leave(who)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.period_s)
            try:
                for chosen in self.check():
                    self.shed(chosen)
            except Exception:  # a bug here must not end the watch
                log.exception("the slowdown watch failed once")


def _cost(who: Listener, now: float) -> float:
    return who.lane.cost.at(now) if who.lane is not None else 0.0
