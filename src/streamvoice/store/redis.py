"""Redis, for replicas: a record is a string key with its expiry; an ordered set per (kind, owner) and one per
kind index the live keys by expiry, pruned as they are read, so listing and counting never scan the keyspace.
Each change is one MULTI transaction; a bounded insert and a compare-and-swap are each one script, so no
other replica's write falls between the check and the write.

The URL is parsed when the store is made (the server's start), so a malformed one (a password with a ``/``
not percent-encoded) stops the start with a message that names no part of it, instead of a 500 on every
call. Nothing a caller is told names the host, the port or the password (``StoreError``)."""

from __future__ import annotations

import math
import time

import redis.asyncio as aioredis
from redis.connection import parse_url
from redis.exceptions import RedisError

from streamvoice.store import Added, StoreError, check_names, check_value

PREFIX = "streamvoice"
MAX_CONNECTIONS = 64  # to Redis per process; a call past it waits for one (up to the socket timeout)
TIMEOUT_S = 5.0

# KEYS: record, owner's index, kind's index. ARGV: value, ttl ms (0: none), expiry score, now, member in the
# owner's index, member in the kind's index, per-owner bound, total bound, 1 to leave an existing record.
_ADD = """
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[4])
local exists = redis.call('EXISTS', KEYS[1]) == 1
if exists and ARGV[9] == '1' then return 'exists' end
if not exists then
  if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[7]) then return 'owner_full' end
  if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[8]) then return 'total_full' end
end
if tonumber(ARGV[2]) > 0 then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else redis.call('SET', KEYS[1], ARGV[1]) end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[5])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[6])
if exists then return 'replaced' end
return 'added'
"""
# KEYS: record, owner's index, kind's index. ARGV: old, new, ttl ms (0: none), expiry score, the members.
_SWAP = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if tonumber(ARGV[3]) > 0 then redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
else redis.call('SET', KEYS[1], ARGV[2]) end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[6])
return 1
"""
# KEYS: counter, owner's index, kind's index. ARGV: amount, limit (-1: none), ttl ms (0: none), expiry
# score, the members. A counter's expiry is set at its first count and kept after.
_TALLY = """
local now = tonumber(redis.call('GET', KEYS[1]) or '0')
local total = now + tonumber(ARGV[1])
if tonumber(ARGV[2]) >= 0 and total > tonumber(ARGV[2]) then return -1 end
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('SET', KEYS[1], total, 'KEEPTTL')
else
  if tonumber(ARGV[3]) > 0 then redis.call('SET', KEYS[1], total, 'PX', ARGV[3])
  else redis.call('SET', KEYS[1], total) end
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
  redis.call('ZADD', KEYS[3], ARGV[4], ARGV[6])
end
return total
"""
Arg = bytes | str | int | float  # a script's argument
# What a failed call may raise besides RedisError: a socket error, a value redis-py could not read.
FAILURES = (RedisError, OSError, ValueError)


def checked_url(url: str) -> str:
    """The URL, if redis-py can read it; else ``ValueError`` saying what to fix and showing none of it."""
    try:
        parse_url(url)  # type: ignore[no-untyped-call]
    except ValueError:
        raise ValueError(
            "STREAMVOICE_STORE_URL is not a Redis URL redis-py can read (the URL is not shown: it may hold a "
            "password): write it redis://[:PASSWORD@]HOST:PORT/DB with any of / ? # @ : % in the password "
            "percent-encoded (/ as %2F)"
        ) from None
    return url


class RedisStore:
    def __init__(self, url: str) -> None:
        self.url = checked_url(url)
        self._client: aioredis.Redis | None = None

    def _redis(self) -> aioredis.Redis:
        if self._client is None:
            # A blocking pool: past its connections a call waits for one instead of failing with "Too
            # many connections" (150 creations at once were answered 503).
            pool = aioredis.BlockingConnectionPool.from_url(
                self.url,
                max_connections=MAX_CONNECTIONS,
                timeout=TIMEOUT_S,
                socket_timeout=TIMEOUT_S,
                socket_connect_timeout=TIMEOUT_S,
            )
            self._client = aioredis.Redis(connection_pool=pool)
        return self._client

    def _where(self) -> str:
        parsed = self.url.split("@")[-1]  # never a password, even in the server's own log
        return f"redis {parsed[:80]}"

    @staticmethod
    def _record(kind: str, owner: str, key: str) -> str:
        return f"{PREFIX}:{kind}:{owner}:{key}"

    @classmethod
    def _keys(cls, kind: str, owner: str, key: str) -> list[str]:
        """What a script over one record names: the record, its owner's index and its kind's."""
        return [cls._record(kind, owner, key), cls._index(kind, owner), cls._index(kind)]

    @staticmethod
    def _index(kind: str, owner: str | None = None) -> str:
        return f"{PREFIX}:{kind}" if owner is None else f"{PREFIX}:{kind}:{owner}"

    async def get(self, kind: str, owner: str, key: str) -> bytes | None:
        try:
            value = await self._redis().get(self._record(kind, owner, key))
        except FAILURES as exc:
            raise self._failed(exc) from exc
        return value if isinstance(value, bytes) else None

    async def put(self, kind: str, owner: str, key: str, value: bytes, ttl_s: float | None = None) -> None:
        check_names(kind, owner, key)
        check_value(value)
        ttl_ms, expires = _expiry(ttl_s, time.time())
        try:
            async with self._redis().pipeline(transaction=True) as tx:
                tx.set(self._record(kind, owner, key), value, px=ttl_ms or None)
                tx.zadd(self._index(kind, owner), {key: expires})
                tx.zadd(self._index(kind), {f"{owner}:{key}": expires})
                await tx.execute()
        except FAILURES as exc:
            raise self._failed(exc) from exc

    async def add(
        self,
        kind: str,
        owner: str,
        key: str,
        value: bytes,
        ttl_s: float | None = None,
        *,
        per_owner: int,
        total: int,
        only_new: bool = False,
    ) -> Added:
        check_names(kind, owner, key)
        check_value(value)
        now = time.time()
        ttl_ms, expires = _expiry(ttl_s, now)
        args: list[Arg] = [
            value, ttl_ms, _score(expires), now, key, f"{owner}:{key}", per_owner, total, int(only_new)
        ]  # fmt: skip
        try:
            result = await self._redis().eval(_ADD, 3, *self._keys(kind, owner, key), *args)  # type: ignore[misc]
        except FAILURES as exc:
            raise self._failed(exc) from exc
        answer = result.decode() if isinstance(result, bytes) else str(result)
        assert answer in ("added", "replaced", "exists", "owner_full", "total_full"), answer
        return answer  # type: ignore[return-value]

    async def swap(
        self, kind: str, owner: str, key: str, old: bytes, new: bytes, ttl_s: float | None = None
    ) -> bool:
        check_value(new)
        ttl_ms, expires = _expiry(ttl_s, time.time())
        args: list[Arg] = [old, new, ttl_ms, _score(expires), key, f"{owner}:{key}"]
        try:
            return bool(await self._redis().eval(_SWAP, 3, *self._keys(kind, owner, key), *args))  # type: ignore[misc]
        except FAILURES as exc:
            raise self._failed(exc) from exc

    async def tally(
        self, kind: str, owner: str, key: str, amount: int, limit: int | None, ttl_s: float | None = None
    ) -> int | None:
        check_names(kind, owner, key)
        ttl_ms, expires = _expiry(ttl_s, time.time())
        bound = -1 if limit is None else limit
        args: list[Arg] = [amount, bound, ttl_ms, _score(expires), key, f"{owner}:{key}"]
        try:
            total = await self._redis().eval(_TALLY, 3, *self._keys(kind, owner, key), *args)  # type: ignore[misc]
        except FAILURES as exc:
            raise self._failed(exc) from exc
        return None if int(total) < 0 else int(total)

    async def delete(self, kind: str, owner: str, key: str) -> bool:
        try:
            async with self._redis().pipeline(transaction=True) as tx:
                tx.delete(self._record(kind, owner, key))
                tx.zrem(self._index(kind, owner), key)
                tx.zrem(self._index(kind), f"{owner}:{key}")
                deleted, _, _ = await tx.execute()
        except FAILURES as exc:
            raise self._failed(exc) from exc
        return bool(deleted)

    async def _pruned(self, index: str) -> list[bytes]:
        async with self._redis().pipeline(transaction=True) as tx:
            tx.zremrangebyscore(index, "-inf", time.time())
            tx.zrange(index, 0, -1)
            _, members = await tx.execute()
        return list(members)

    async def keys(self, kind: str, owner: str) -> list[str]:
        try:
            return [m.decode() for m in await self._pruned(self._index(kind, owner))]
        except FAILURES as exc:
            raise self._failed(exc) from exc

    async def count(self, kind: str, owner: str | None = None) -> int:
        try:
            async with self._redis().pipeline(transaction=True) as tx:
                tx.zremrangebyscore(self._index(kind, owner), "-inf", time.time())
                tx.zcard(self._index(kind, owner))
                _, number = await tx.execute()
        except FAILURES as exc:
            raise self._failed(exc) from exc
        return int(number)

    def _failed(self, exc: Exception) -> StoreError:
        return StoreError(
            f"the store ({self._where()}) failed: {exc}; check STREAMVOICE_STORE_URL and that Redis runs"
        )

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def _expiry(ttl_s: float | None, now: float) -> tuple[int, float]:
    """(the record's time to live in ms, 0 for none; its expiry as an index score, inf for none)."""
    return (0, math.inf) if ttl_s is None else (max(1, round(ttl_s * 1000)), now + ttl_s)


def _score(expires: float) -> str:
    """An ordered set's score as a script's argument (Redis reads "inf")."""
    return "inf" if math.isinf(expires) else repr(expires)
