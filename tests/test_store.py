"""The store's one interface on both backends: the embedded SQLite file and a real Redis."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from streamvoice.store import MAX_VALUE_BYTES, Store, StoreError, open_store
from tests.redis_server import RedisServer


@pytest.fixture(params=["sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        opened = open_store(f"sqlite://{tmp_path / 'store.sqlite3'}")
    else:
        redis: RedisServer = request.getfixturevalue("redis_server")
        opened = open_store(redis.url)
    yield opened
    await opened.close()


def kind() -> str:
    return f"test-{uuid.uuid4().hex[:8]}"  # each test's records apart (one Redis for the session)


async def test_records_by_kind_owner_and_key(store: Store) -> None:
    k = kind()
    await store.put(k, "alice", "one", b"1")
    await store.put(k, "alice", "two", b"2")
    await store.put(k, "bob", "one", b"b1")
    assert await store.get(k, "alice", "one") == b"1"
    assert await store.get(k, "bob", "one") == b"b1"
    assert await store.get(k, "carol", "one") is None
    assert await store.keys(k, "alice") == ["one", "two"]
    assert (await store.count(k, "alice"), await store.count(k, "bob"), await store.count(k)) == (2, 1, 3)
    await store.put(k, "alice", "one", b"new")  # a put replaces
    assert await store.get(k, "alice", "one") == b"new"
    assert await store.count(k) == 3
    assert await store.delete(k, "alice", "one") is True
    assert await store.delete(k, "alice", "one") is False
    assert await store.get(k, "alice", "one") is None
    assert (await store.count(k, "alice"), await store.count(k)) == (1, 2)


async def test_expired_records_are_neither_read_nor_counted(store: Store) -> None:
    k = kind()
    # Long enough to outlast the three calls below on a loaded machine (0.3 s once did not, in CI)
    await store.put(k, "alice", "brief", b"x", ttl_s=2.0)
    await store.put(k, "alice", "later", b"y", ttl_s=60)
    await store.put(k, "alice", "kept", b"z")
    assert await store.keys(k, "alice") == ["brief", "later", "kept"]  # soonest to expire first
    async with asyncio.timeout(10):  # the record's own expiry, however the backend keeps time
        while await store.get(k, "alice", "brief") is not None:
            await asyncio.sleep(0.05)
    assert await store.keys(k, "alice") == ["later", "kept"]
    assert (await store.count(k, "alice"), await store.count(k)) == (2, 2)


async def test_a_record_past_the_size_bound_is_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="at most"):
        await store.put(kind(), "alice", "big", b"x" * (MAX_VALUE_BYTES + 1))


async def test_two_clients_of_one_store_see_each_others_records(store: Store) -> None:
    """What replicas (Redis) or the processes of one machine (SQLite) rely on."""
    other = open_store(store.url)
    try:
        k = kind()
        await store.put(k, "alice", "made-here", b"1")
        assert await other.get(k, "alice", "made-here") == b"1"
        await other.delete(k, "alice", "made-here")
        assert await store.get(k, "alice", "made-here") is None
    finally:
        await other.close()


async def test_an_unreachable_store_says_what_to_check() -> None:
    from streamvoice.asgi import free_port

    unreachable = open_store(f"redis://:secret@127.0.0.1:{free_port()}/0")
    with pytest.raises(StoreError) as caught:
        await unreachable.get("k", "o", "x")
    assert "STREAMVOICE_STORE_URL" in str(caught.value) and "secret" not in str(caught.value)
    await unreachable.close()


def test_a_url_that_names_no_store_is_refused() -> None:
    with pytest.raises(ValueError, match="redis://"):
        open_store("mysql://db/x")
