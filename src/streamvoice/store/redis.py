"""Redis, for replicas: a record is a string key with its expiry; an ordered set per (kind, owner) and one per
kind index the live keys by expiry, pruned as they are read, so listing and counting never scan the keyspace.
Each change is one MULTI transaction."""

from __future__ import annotations

import math
import time

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from streamvoice.store import StoreError, check_names, check_value

PREFIX = "streamvoice"


class RedisStore:
    def __init__(self, url: str) -> None:
        self.url = url
        self._client: aioredis.Redis | None = None

    def _redis(self) -> aioredis.Redis:
        if self._client is None:
            self._client = aioredis.from_url(self.url, socket_timeout=5, socket_connect_timeout=5)
        return self._client

    def _where(self) -> str:
        parsed = self.url.split("@")[-1]  # never a password in a message
        return f"redis {parsed[:80]}"

    @staticmethod
    def _record(kind: str, owner: str, key: str) -> str:
        return f"{PREFIX}:{kind}:{owner}:{key}"

    @staticmethod
    def _index(kind: str, owner: str | None = None) -> str:
        return f"{PREFIX}:{kind}" if owner is None else f"{PREFIX}:{kind}:{owner}"

    async def get(self, kind: str, owner: str, key: str) -> bytes | None:
        try:
            value = await self._redis().get(self._record(kind, owner, key))
        except RedisError as exc:
            raise self._failed(exc) from exc
        return value if isinstance(value, bytes) else None

    async def put(self, kind: str, owner: str, key: str, value: bytes, ttl_s: float | None = None) -> None:
        check_names(kind, owner, key)
        check_value(value)
        expires = math.inf if ttl_s is None else time.time() + ttl_s
        try:
            async with self._redis().pipeline(transaction=True) as tx:
                if ttl_s is None:
                    tx.set(self._record(kind, owner, key), value)
                else:
                    tx.set(self._record(kind, owner, key), value, px=max(1, round(ttl_s * 1000)))
                tx.zadd(self._index(kind, owner), {key: expires})
                tx.zadd(self._index(kind), {f"{owner}:{key}": expires})
                await tx.execute()
        except RedisError as exc:
            raise self._failed(exc) from exc

    async def delete(self, kind: str, owner: str, key: str) -> bool:
        try:
            async with self._redis().pipeline(transaction=True) as tx:
                tx.delete(self._record(kind, owner, key))
                tx.zrem(self._index(kind, owner), key)
                tx.zrem(self._index(kind), f"{owner}:{key}")
                deleted, _, _ = await tx.execute()
        except RedisError as exc:
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
        except RedisError as exc:
            raise self._failed(exc) from exc

    async def count(self, kind: str, owner: str | None = None) -> int:
        try:
            async with self._redis().pipeline(transaction=True) as tx:
                tx.zremrangebyscore(self._index(kind, owner), "-inf", time.time())
                tx.zcard(self._index(kind, owner))
                _, number = await tx.execute()
        except RedisError as exc:
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
