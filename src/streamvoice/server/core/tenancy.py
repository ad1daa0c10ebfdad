"""Each tenant's share of the machine and its use: at most its ``listeners`` rooms at once (counted here
before any ``await``, and as leases in the store so the cap holds across replicas), at most its
``chars_per_day`` characters a day (counted in the store, so every replica counts against one quota), and
what it used, counted per key name for ``/metrics`` and the vendors' usage answers.

Whom a request or connection serves is set once, where its key is checked (``serving``), and read by
whatever it starts (its slot, its utterances), in any task it creates: a context variable, like the slots it
holds (``rooms.holding``). Checked by ``pytest tests/test_tenants.py``."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections import Counter
from collections.abc import Iterable

from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.metrics import Metrics
from streamvoice.store import Store, StoreError
from streamvoice.store.keys import Tenant

USAGE_KIND = "usage"
DAY_S = 86_400
# A capped tenant's listeners are leases in the store, so its cap holds across replicas: each expires this
# long after its replica last renewed it (every LEASE_S / 3), so a replica that dies frees its tenants' slots.
LEASE_KIND = "listener_lease"
LEASE_S = 15.0
MAX_LEASES = 1_000_000

_SERVING: contextvars.ContextVar[Tenant | None] = contextvars.ContextVar("tenant", default=None)


def serving(tenant: Tenant | None) -> None:
    """The request or connection being served is this tenant's (None: a server without keys, or a wire that takes none)."""
    _SERVING.set(tenant)


def current() -> Tenant | None:
    return _SERVING.get()


def day_of(now: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(now))


def today(now: float) -> str:
    """The key of a tenant's count of characters for the (UTC) day of ``now``."""
    return f"chars:{day_of(now)}"


def at_cap(tenant: Tenant, where: str = "") -> ProtocolError:
    """A tenant holding every listener its share allows (``where``: across the servers, or this one)."""
    return ProtocolError(
        ErrorCode.CONCURRENT_LIMIT_EXCEEDED,
        f"this key may hold {tenant.listeners} listener(s) at once and holds them all{where}: end one, or "
        "retry in about 1 s",
    )


def next_day_at(now: float) -> int:
    """When today's count starts again (UTC midnight), in Unix seconds."""
    return (int(now) // DAY_S + 1) * DAY_S


def turn(
    tenant: Tenant | None, holding: Iterable[Tenant | None], waiting: Iterable[Tenant | None], capacity: int
) -> float:
    """How far into its share a tenant is, given the tenants of the listeners admitted and waiting (lower
    is admitted first when the machine is full): the listeners it holds against its share, its own
    ``listeners`` or, without one, an even part of the machine among the tenants that want it."""
    held = [_name(t) for t in holding]
    wanting = set(held) | {_name(t) for t in waiting}
    share = tenant.listeners if tenant is not None and tenant.listeners else capacity / max(1, len(wanting))
    return held.count(_name(tenant)) / max(share, 1e-9)


def _name(tenant: Tenant | None) -> str | None:
    return tenant.name if tenant is not None else None


class Tenancy:
    def __init__(self, store: Store, metrics: Metrics) -> None:
        self.store = store
        self.metrics = metrics
        self.held: Counter[str] = Counter()  # rooms held now, by tenant name
        self._leases: dict[str, Tenant] = {}  # this process's leases in the store, renewed by ``run``
        self._forgetting: set[asyncio.Task[None]] = set()
        self._unwritten: Counter[str] = Counter()  # unbounded tenants' characters not in the store yet

    def take(self, tenant: Tenant | None) -> None:
        """A room for one of the tenant's requests or connections, within its share; counted before any
        ``await`` (callers arriving together cannot all pass it), given back by ``give``."""
        if tenant is None:
            return
        if tenant.listeners is not None and self.held[tenant.name] >= tenant.listeners:
            self.refused(tenant, ErrorCode.CONCURRENT_LIMIT_EXCEEDED)
            raise at_cap(tenant)
        self.held[tenant.name] += 1
        self.metrics.key(tenant.name).requests += 1

    def give(self, tenant: Tenant | None, lease: str | None = None) -> None:
        if tenant is not None:
            self.held[tenant.name] -= 1
            if self.held[tenant.name] <= 0:
                del self.held[tenant.name]
        if lease is not None:
            self.drop_lease(lease)

    async def claim(self, tenant: Tenant | None, lease: str) -> None:
        """The room ``take`` counted here, as a lease in the store every replica counts: a capped tenant at
        its cap across the cluster is refused (``concurrent_limit_exceeded``) and nothing is kept."""
        if tenant is None or tenant.listeners is None:
            return
        added = await self.store.add(
            LEASE_KIND, tenant.owner, lease, b"", LEASE_S, per_owner=tenant.listeners, total=MAX_LEASES
        )
        if added != "added":
            self.refused(tenant, ErrorCode.CONCURRENT_LIMIT_EXCEEDED)
            raise at_cap(tenant, " across the servers")
        self._leases[lease] = tenant

    def drop_lease(self, lease: str) -> None:
        """Give a lease back (in the background: its room here is free now; the store forgets it within
        ``LEASE_S`` whatever happens to this call)."""
        tenant = self._leases.pop(lease, None)
        if tenant is not None:
            task = asyncio.get_running_loop().create_task(self._forget(tenant, lease))
            self._forgetting.add(task)
            task.add_done_callback(self._forgetting.discard)

    async def _forget(self, tenant: Tenant, lease: str) -> None:
        with contextlib.suppress(StoreError):  # logged where raised; it expires on its own
            await self.store.delete(LEASE_KIND, tenant.owner, lease)

    async def run(self) -> None:
        """Renew this process's leases and write the unbounded tenants' use every ``LEASE_S / 3`` until
        cancelled."""
        while True:
            await asyncio.sleep(LEASE_S / 3)
            for lease, tenant in list(self._leases.items()):
                with contextlib.suppress(StoreError):
                    await self.store.put(LEASE_KIND, tenant.owner, lease, b"", LEASE_S)
            await self.write_use()

    def refused(self, tenant: Tenant | None, reason: str) -> None:
        if tenant is not None:
            self.metrics.key(tenant.name).refusals[str(reason)] += 1

    def wrote(self, tenant: Tenant | None, chars: int) -> None:
        """Characters a caller sent to be spoken (what ``/metrics`` counts as the key's characters)."""
        if tenant is not None and chars > 0:
            self.metrics.key(tenant.name).characters += chars

    def spoke(self, tenant: Tenant | None, audio_s: float) -> None:
        if tenant is not None and audio_s > 0:
            self.metrics.key(tenant.name).audio_seconds += audio_s

    async def charge(self, tenant: Tenant | None, chars: int, bounded: bool = True) -> None:
        """Count ``chars`` against today's quota before they are spoken; ``quota_exceeded`` (nothing
        counted) when they would pass it. ``bounded=False`` counts them whatever the quota (a stream's last
        characters, already accepted), so what is counted is what was sent. A tenant without a quota is
        counted here and written with the next renewal (``run``): no store call on its speech's path, and a
        store that does not answer never stops it."""
        if tenant is None or chars <= 0:
            return
        if tenant.chars_per_day is None:
            self._unwritten[tenant.owner] += chars
            return
        limit = tenant.chars_per_day if bounded else None
        now = time.time()
        total = await self.store.tally(USAGE_KIND, tenant.owner, today(now), chars, limit, ttl_s=2 * DAY_S)
        if total is None:
            self.refused(tenant, ErrorCode.QUOTA_EXCEEDED)
            raise ProtocolError(
                ErrorCode.QUOTA_EXCEEDED,
                f"this key may have {limit} characters spoken a day and these {chars} would pass it: send "
                f"less, or retry after {time.strftime('%H:%M', time.gmtime(next_day_at(now)))} UTC",
            )

    async def used_today(self, tenant: Tenant) -> int:
        """Today's characters on every replica (those this one has not written yet included)."""
        raw = await self.store.get(USAGE_KIND, tenant.owner, today(time.time()))
        return (int(raw) if raw else 0) + self._unwritten.get(tenant.owner, 0)

    async def write_use(self) -> None:
        """Add what unbounded tenants used since the last write to today's counts in the store; what does
        not reach it waits for the next write."""
        for owner, chars in list(self._unwritten.items()):
            with contextlib.suppress(StoreError):
                await self.store.tally(USAGE_KIND, owner, today(time.time()), chars, None, 2 * DAY_S)
                self._unwritten[owner] -= chars
                if self._unwritten[owner] <= 0:
                    del self._unwritten[owner]


class Account:
    """One utterance's use, counted in its tenant's share: characters written (``/metrics``), charged against
    the daily quota before they are planned, and the audio seconds it made."""

    def __init__(self, tenancy: Tenancy | None) -> None:
        self._tenancy = tenancy
        self._tenant = current() if tenancy is not None else None
        self._unbilled = 0

    def wrote(self, chars: int) -> None:
        if self._tenancy is not None:
            self._tenancy.wrote(self._tenant, chars)
            self._unbilled += chars

    async def charge(self, bounded: bool = True) -> None:
        """Charge what was written since the last charge (before it is planned: ``quota_exceeded`` ends the
        utterance with nothing of it spoken). ``bounded=False`` at the end of input: the last characters (a
        stream's trailing punctuation) were taken already."""
        if self._tenancy is not None and self._unbilled:
            chars, self._unbilled = self._unbilled, 0
            await self._tenancy.charge(self._tenant, chars, bounded)

    def spoke(self, audio_s: float) -> None:
        if self._tenancy is not None:
            self._tenancy.spoke(self._tenant, audio_s)
