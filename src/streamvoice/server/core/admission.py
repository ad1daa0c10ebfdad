"""Admission: take on only the listeners the model worker can keep fed, so one caller too many is told
so (refused, or queued with a bound) instead of making every call in progress stall.

A *listener* is a session (or a streamed HTTP answer) with speech in progress. It holds a slot from its
first message until it has had no work for ``idle_release_s`` (an LLM-paced answer sends its next sentence
within that), or until it ends. The slots are the server's capacity in real-time listeners: fixed by
configuration, or measured: how many listeners' decoding fits in the workers' time, from the seconds of
work per second of audio of recent full-size windows decoded with nothing else running (a piece's first
window includes the front model). Contended windows are left out: they are slower, and counting them
would make the capacity fall exactly when the server is busy.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from typing import Literal

from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.holder import Holder

Mode = Literal["off", "refuse", "queue"]
Decision = Literal["admitted", "queued", "refused"]
# A holder past ``max_hold_s`` gives its slot up at its next piece's end: a piece is at most this long.
PIECE_S = 10.0


class Admission[H: Holder]:
    """Slots for listeners, a bounded FIFO of waiting ones, and the figures /metrics shows."""

    def __init__(
        self,
        mode: Mode,
        capacity: Callable[[], int],
        queue_bound: int = 8,
        max_wait_s: float = 10.0,
        idle_release_s: float = 2.0,
        max_hold_s: float = 30.0,
        clock: Callable[[], float] | None = None,
        turn: Callable[[H], float] | None = None,
    ) -> None:
        self.mode = mode
        # Who of those waiting is admitted first when a slot frees: the lowest ``turn`` (a tenant furthest
        # below its share: ``tenancy.turn``), in arrival order among equals; None: arrival order.
        self._turn = turn
        self._capacity = capacity
        self.queue_bound = queue_bound
        self.max_wait_s = max_wait_s
        self.idle_release_s = idle_release_s
        # A holder that has kept its slot this long gives it up at its next pause while others want one, so
        # a session that sends just inside the idle release cannot hold a slot for good
        # (``test_a_long_held_slot_goes_at_its_pause_while_others_wait``).
        self.max_hold_s = max_hold_s
        self._clock = clock or _loop_time
        self._since: dict[H, float] = {}
        self._contended_until = float("-inf")  # someone was refused or queued until about then
        # When the last caller that found every slot taken could expect one (seconds; None: unknown).
        self._frees_in: float | None = None
        self._holders: set[H] = set()
        self._waiting: OrderedDict[H, asyncio.Future[None]] = OrderedDict()
        self._release_timers: dict[H, asyncio.TimerHandle] = {}
        self.refused = 0
        # After a slowdown made the server shed a listener: at most this many held, until then (``lower``).
        self._ceiling: tuple[int, float] | None = None

    # -- figures --------------------------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        measured = self._capacity()
        if self._ceiling is not None:
            ceiling, until = self._ceiling
            if self._clock() < until:
                return max(1, min(measured, ceiling))
            self._ceiling = None
        return measured

    def lower(self, ceiling: int, for_s: float) -> None:
        """The machine slowed down: hold at most ``ceiling`` listeners for ``for_s`` seconds, whatever the
        measure says (it follows a slower machine over tens of seconds; newcomers must be told now)."""
        self._ceiling = (ceiling, self._clock() + for_s)

    def oldest_first(self) -> list[H]:
        """The holders in the order they were admitted: whom a slowdown protects first."""
        return sorted(self._holders, key=lambda who: self._since.get(who, 0.0))

    @property
    def admitted(self) -> int:
        return len(self._holders)

    @property
    def queued(self) -> int:
        return len(self._waiting)

    @property
    def headroom(self) -> int:
        """Hs that could start now without waiting (negative: callers are queued)."""
        return self.capacity - self.admitted - self.queued

    def retry_after_s(self) -> float:
        """A hint for a refused caller: about when a slot frees (from what the holders still have to say,
        when they can tell; else an answer's sentences plus the release)."""
        if self._frees_in is not None:
            return round(max(1.0, self._frees_in), 1)
        return round(max(1.0, self.idle_release_s + 3.0 * (1 + self.queued)), 1)

    def _slot_frees_in(self, hand_over: bool = True) -> float | None:
        """Seconds until the slot a newcomer would wait for frees: each holder's ``speaking_until`` (when
        its queued audio will have played) plus the idle release, the waiters ahead taking the earlier
        ones. None when a holder cannot tell (it may free at any moment)."""
        now = self._clock()
        ends = []
        for who in self._holders:
            until = who.speaking_until()
            if until is None:
                return None
            end = max(until, now) + self.idle_release_s
            # a holder that never pauses hands its slot over once held past the limit, where it can: a
            # streamed HTTP answer cannot (``Seat.hands_over``), so the hint counts to its end
            if hand_over and who.hands_over:
                end = min(end, max(self._since.get(who, now) + self.max_hold_s, now) + PIECE_S)
            ends.append(end)
        ends.sort()
        needed = len(self._holders) - self.capacity + len(self._waiting)  # leavers before our turn
        if needed < 0:
            return 0.0
        return ends[needed] - now if needed < len(ends) else None

    # -- decisions ------------------------------------------------------------------------------------
    def holds(self, who: H) -> bool:
        return self.mode == "off" or who in self._holders

    def enter(self, who: H, can_wait: bool = True) -> Decision:
        """A listener wants to speak: take a slot, wait for one (told now), or be refused (told now).
        ``can_wait=False`` for callers that cannot be told they wait (an HTTP answer has no headers yet):
        queued only when a slot is known to free within ``max_wait_s``, else refused at once."""
        self._keep(who)
        self._admit_waiting()  # the measured capacity may have grown
        if self.mode == "off" or who in self._holders or who in self._waiting:
            return "queued" if who in self._waiting else "admitted"
        if len(self._holders) < self.capacity and not self._waiting:
            self._hold(who)
            return "admitted"
        self._contended_until = self._clock() + self.max_wait_s
        self._frees_in = (
            self._slot_frees_in()
        )  # the retry hint: what the server can keep, hand-overs included
        too_long = self._frees_in is not None and self._frees_in > self.max_wait_s
        # A caller that cannot be told it waits (an HTTP answer before its headers) waits only for a slot
        # known to free in time: a listener whose speech has ended, say, not a holder that cannot tell, nor
        # a turn that ends only by being handed over (tens of seconds of silence before any header).
        ends = self._frees_in if can_wait else self._slot_frees_in(hand_over=False)
        frees_soon = can_wait or (ends is not None and ends <= self.max_wait_s)
        if self.mode == "queue" and frees_soon and len(self._waiting) < self.queue_bound and not too_long:
            self._waiting[who] = asyncio.get_running_loop().create_future()
            return "queued"
        self.refused += 1
        return "refused"

    def admit(self, who: H, can_wait: bool = True) -> Literal["admitted", "queued"]:
        """``enter``, with a refusal raised as the one ``server_busy`` every surface tells in its own shape."""
        decision = self.enter(who, can_wait)
        if decision == "refused":
            raise self.busy("no listener slot is free")
        return decision

    def _hold(self, who: H) -> None:
        self._holders.add(who)
        self._since[who] = self._clock()

    def contended(self) -> bool:
        """Someone waits for a slot now, or was refused one within the last ``max_wait_s``."""
        return bool(self._waiting) or self._clock() < self._contended_until

    def position(self, who: H) -> int:
        """1-based place in the queue (0: not waiting)."""
        for i, key in enumerate(self._waiting, 1):
            if key is who:
                return i
        return 0

    def overdue(self, who: H) -> bool:
        """``who`` has held its slot past ``max_hold_s`` while another caller waits in the queue: its turn is
        over (a caller refused earlier is served by the release at the holder's next pause, ``idle``)."""
        held_s = self._clock() - self._since.get(who, self._clock())
        return who in self._holders and held_s >= self.max_hold_s and bool(self._waiting)

    def hand_over(self, who: H) -> Decision:
        """``who``'s turn is over (``overdue``): its slot goes to the first waiting, and it waits again at the
        back of the queue (admitted again at once if nobody waits after all)."""
        self.leave(who)
        return self.enter(who)

    async def wait(self, who: H, timeout_s: float | None = None) -> None:
        """Until ``who`` holds a slot; ``server_busy`` after ``max_wait_s`` (or ``timeout_s``; the caller was
        told it waits)."""
        ticket = self._waiting.get(who)
        if ticket is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(ticket), timeout_s or self.max_wait_s)
        except TimeoutError:
            self._waiting.pop(who, None)
            self.refused += 1
            raise self.busy(f"no listener slot freed within {self.max_wait_s:g} s") from None

    async def take_turn(self, who: H, told: Callable[[], None]) -> None:
        """At a piece's end: a holder past ``max_hold_s`` while others want a slot (one that never pauses,
        such as a socket streaming a whole book) hands it over and waits its turn again (``told`` first, so
        its wire can say so); back when the slot comes back, ``server_busy`` if it cannot be (the queue is
        full, or one hold and a wait passed)."""
        if not self.overdue(who):
            return
        decision = self.hand_over(who)
        if decision == "refused":
            raise self.busy("this listener's turn is over and the queue is full")
        if decision == "queued":
            told()
            await self.wait(who, self.max_hold_s + self.max_wait_s)

    def busy(self, why: str) -> ProtocolError:
        return ProtocolError(
            ErrorCode.SERVER_BUSY,
            f"{why}: the server is speaking to all the listeners it can keep fed ({self.capacity}); "
            f"retry in about {self.retry_after_s():g} s or on another instance",
        )

    def idle(self, who: H) -> None:
        """``who`` has no work now: release its slot after ``idle_release_s`` unless it speaks again."""
        if who not in self._holders or who in self._release_timers:
            return
        held_s = self._clock() - self._since.get(who, self._clock())
        if held_s >= self.max_hold_s and self.contended():
            self.leave(who)  # its turn is over: the next message queues (or is refused) like anyone's
            return
        loop = asyncio.get_running_loop()
        self._release_timers[who] = loop.call_later(self.idle_release_s, self.leave, who)

    def leave(self, who: H) -> None:
        """``who`` is gone (or idle long enough): free its slot or its place in the queue."""
        self._keep(who)
        self._holders.discard(who)
        self._since.pop(who, None)
        ticket = self._waiting.pop(who, None)
        if ticket is not None and not ticket.done():
            ticket.cancel()
        self._admit_waiting()

    def _keep(self, who: H) -> None:
        timer = self._release_timers.pop(who, None)
        if timer is not None:
            timer.cancel()

    @property
    def holders(self) -> frozenset[H]:
        return frozenset(self._holders)

    @property
    def waiting(self) -> list[H]:
        return list(self._waiting)

    def _admit_waiting(self) -> None:
        while self._waiting and len(self._holders) < self.capacity:
            who = next(iter(self._waiting)) if self._turn is None else min(self._waiting, key=self._turn)
            ticket = self._waiting.pop(who)
            if ticket.done():
                continue
            self._hold(who)
            ticket.set_result(None)


def _loop_time() -> float:
    return asyncio.get_running_loop().time()
