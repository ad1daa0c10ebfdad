"""Keys as records: each tenant's key kept as a digest (never the key), its name, when it was made and ends,
and its share of the machine; and the ring every server and agent checks keys against, in memory, read
again from the store every ``REFRESH_S`` so a key made or revoked on one replica holds on every replica
within seconds. The server's ``AUTH_TOKEN`` stays the bootstrap key: it manages the others, and with no
key records a server behaves as a single-key server did. Checked by ``pytest tests/test_keys.py``."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import re
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass

from streamvoice.store import Store, StoreError, owner

log = logging.getLogger("streamvoice.keys")

KIND = "api_key"  # one record per key name, all under one owner
VERSION_KIND = "api_key_version"  # rewritten on every change: the ring reads the records only when it moved
ALL = "all"
MAX_KEYS = 10_000
REFRESH_S = 2.0
BOOTSTRAP = "auth-token"  # the name AUTH_TOKEN's tenant goes by (in /metrics, in the logs)
NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")
KEY_PREFIX = "sk_sv_"


def key_digest(key: str) -> str:
    """What is kept of a key: its SHA-256. A key is 32 random bytes (``new_key``), so a fast hash is enough:
    nothing can be guessed back from it, and every check is one lookup, however many keys exist."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def check_name(name: str) -> str:
    if not NAME.fullmatch(name) or name == BOOTSTRAP:
        raise ValueError(
            f"a key's name is 1-63 of a-z, 0-9, '_', '.', '-', starting with a letter or digit, and not "
            f"{BOOTSTRAP!r} (AUTH_TOKEN's): {name[:70]!r} is not"
        )
    return name


@dataclass(frozen=True)
class Tenant:
    """Who a key speaks for: its name, the owner digest of what it makes (dictionaries, lexicons,
    conversations), its share (``listeners`` at once, ``chars_per_day``; None: no bound of its own), and
    ``digest`` to tell a revoked key from a new one of the same name. ``admin``: the bootstrap key."""

    name: str
    owner: str
    digest: str
    listeners: int | None = None
    chars_per_day: int | None = None
    admin: bool = False


@dataclass(frozen=True)
class KeyRecord:
    name: str
    digest: str
    created: float
    expires: float | None = None
    listeners: int | None = None
    chars_per_day: int | None = None

    def live(self, now: float) -> bool:
        return self.expires is None or self.expires > now

    @property
    def tenant(self) -> Tenant:
        # A tenant's records are its name's: a key revoked and made again under the same name keeps them.
        return Tenant(
            self.name, owner("\x00tenant\x00" + self.name), self.digest, self.listeners, self.chars_per_day
        )

    def shown(self) -> dict[str, object]:
        """What listing a key shows: everything but its digest."""
        return {k: v for k, v in asdict(self).items() if k != "digest"}


def bootstrap_tenant(token: str) -> Tenant:
    # Its owner is the digest of the token itself, as before keys were records: what it made stays its own.
    return Tenant(BOOTSTRAP, owner(token), key_digest(token), admin=True)


class KeyRecords:
    """The key records in a store: made, listed, revoked. A change rewrites the version stamp after the
    record, so a ring that reads the stamp and then the records never misses the change."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def create(
        self,
        name: str,
        listeners: int | None = None,
        chars_per_day: int | None = None,
        expires: float | None = None,
    ) -> tuple[str, KeyRecord]:
        """A new key (shown once: only its digest is kept) and its record; ``ValueError`` if the name is
        taken or malformed, or the bounds are not positive."""
        check_name(name)
        for what, value in (("listeners", listeners), ("chars_per_day", chars_per_day)):
            if value is not None and value < 1:
                raise ValueError(f"{what} is at least 1 (leave it out for no bound of its own)")
        now = time.time()
        if expires is not None and expires <= now:
            raise ValueError("a key's expiry must be in the future")
        key = new_key()
        record = KeyRecord(name, key_digest(key), now, expires, listeners, chars_per_day)
        ttl = None if expires is None else expires - now
        added = await self.store.add(
            KIND, ALL, name, _encoded(record), ttl, per_owner=MAX_KEYS, total=MAX_KEYS, only_new=True
        )
        if added == "exists":
            raise ValueError(f"a key named {name!r} exists: revoke it first, or choose another name")
        if added != "added":
            raise ValueError(f"this store holds {MAX_KEYS} keys, the most it keeps: revoke some first")
        await self._moved()
        return key, record

    async def list(self) -> list[KeyRecord]:
        now = time.time()
        found = []
        for name in await self.store.keys(KIND, ALL):
            raw = await self.store.get(KIND, ALL, name)
            if raw is not None and (record := _decoded(raw)) is not None and record.live(now):
                found.append(record)
        return sorted(found, key=lambda r: r.name)

    async def revoke(self, name: str) -> bool:
        gone = await self.store.delete(KIND, ALL, name)
        if gone:
            await self._moved()
        return gone

    async def version(self) -> bytes | None:
        return await self.store.get(VERSION_KIND, ALL, "v")

    async def _moved(self) -> None:
        await self.store.put(VERSION_KIND, ALL, "v", uuid.uuid4().hex.encode())


class Keyring:
    """The keys a process accepts, in memory: the bootstrap key and every live key record.

    ``find`` is a dictionary lookup on the key's digest, never a store call, so a flood of wrong keys costs
    each a hash and nothing else. ``run`` reads the records again every ``refresh_s`` (only when the version
    stamp moved, plus each record's expiry) and tells ``on_revoked`` the digests of keys no longer live."""

    def __init__(self, store: Store | None, bootstrap: str | None, refresh_s: float = REFRESH_S) -> None:
        self.records = KeyRecords(store) if store is not None else None
        self.bootstrap = bootstrap_tenant(bootstrap) if bootstrap else None
        self._bootstrap_key = (bootstrap or "").encode()
        self.refresh_s = refresh_s
        self._tenants: dict[str, tuple[Tenant, float | None]] = {}  # digest -> (tenant, expiry)
        self._version: bytes | None = None
        self.loaded = False
        self._read_at = float("-inf")  # monotonic
        self._reading = asyncio.Lock()
        self._running = False  # ``run`` keeps the keys fresh
        self.on_revoked: Callable[[set[str]], None] = lambda digests: None

    @property
    def required(self) -> bool:
        """Whether a caller needs a key: the bootstrap key is set, or a key record exists."""
        return self.bootstrap is not None or bool(self._tenants)

    def find(self, key: str | None) -> Tenant | None:
        """The tenant this key speaks for; None for a key that is not one (or none)."""
        if not key or len(key) > 512:
            return None
        if self.bootstrap is not None and hmac.compare_digest(
            key.encode(errors="replace"), self._bootstrap_key
        ):
            return self.bootstrap
        return self._live(key_digest(key))

    def holds(self, tenant: Tenant) -> bool:
        """The key this tenant was found by is still live (a check for one found before an ``await``)."""
        return tenant is self.bootstrap or self._live(tenant.digest) is not None

    def _live(self, digest: str) -> Tenant | None:
        found = self._tenants.get(digest)
        if found is None:
            return None
        tenant, expires = found
        return tenant if expires is None or expires > time.time() else None

    def resolve(self, keys: list[str]) -> Tenant | None:
        """The tenant of the first good key among those a caller presented."""
        for key in keys:
            if (tenant := self.find(key)) is not None:
                return tenant
        return None

    async def refresh(self) -> None:
        """Read the records again if their version moved; drop those past their expiry either way."""
        if self.records is not None:
            version = await self.records.version()
            if version != self._version or not self.loaded:
                records = await self.records.list()
                fresh = {r.digest: (r.tenant, r.expires) for r in records}
                self._replace(fresh)
                self._version = version
                self.loaded = True
        now = time.time()
        self._replace({d: t for d, t in self._tenants.items() if t[1] is None or t[1] > now})
        self._read_at = time.monotonic()

    def _replace(self, fresh: dict[str, tuple[Tenant, float | None]]) -> None:
        gone = set(self._tenants) - set(fresh)
        self._tenants = fresh
        if gone:
            log.info("%d key(s) revoked or expired: their connections are closed", len(gone))
            self.on_revoked(gone)

    async def fresh(self) -> None:
        """Read again if the last read is older than ``refresh_s``, for a process that checks keys as they
        come instead of running ``run`` (the agent): one read at a time, however many callers ask. A process
        running ``run`` is kept fresh by it, and never reads on a request's path."""
        if self._running or not self._due():
            return
        async with self._reading:
            if self._due():
                await self._read()

    async def run(self) -> None:
        """Read whenever the last read is ``refresh_s`` old, until cancelled (a read made meanwhile, at the
        start or after a change here, counts: the records are not read twice for it)."""
        self._running = True
        try:
            while True:
                if self._due():
                    await self._read()
                await asyncio.sleep(max(0.0, self._read_at + self.refresh_s - time.monotonic()))
        finally:
            self._running = False

    def _due(self) -> bool:
        return time.monotonic() - self._read_at >= self.refresh_s

    async def _read(self) -> None:
        try:
            await self.refresh()
        except (
            StoreError
        ):  # logged where raised: the keys read last stay, and are read again in half a period
            self._read_at = max(self._read_at, time.monotonic() - self.refresh_s / 2)


def _encoded(record: KeyRecord) -> bytes:
    return json.dumps(asdict(record), separators=(",", ":")).encode()


def _decoded(raw: bytes) -> KeyRecord | None:
    try:
        return KeyRecord(**json.loads(raw))
    except (ValueError, TypeError):
        log.error("a key record in the store could not be read: skipped")
        return None
