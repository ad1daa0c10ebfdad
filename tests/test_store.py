"""The store's one interface on both backends: the embedded SQLite file and a real Redis."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from streamvoice.store import MAX_VALUE_BYTES, Store, StoreError, open_store


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
    assert "STREAMVOICE_STORE_URL" in caught.value.detail and "secret" not in caught.value.detail
    # The caller is told to retry, and neither the host, the port nor the password (issue #64)
    assert "retry" in str(caught.value) and "127.0.0.1" not in str(caught.value)
    await unreachable.close()


def test_a_url_that_names_no_store_is_refused() -> None:
    with pytest.raises(ValueError, match="redis://"):
        open_store("mysql://db/x")


async def test_bounded_additions_at_once_never_pass_their_bounds(store: Store) -> None:
    """Issue #64: 120 creations at once held 166 (SQLite) and 180 (Redis) against 100, the count read before
    the write it bounded. ``add`` checks and writes in one step, from two clients of one store (replicas)."""
    other = open_store(store.url)
    try:
        k = kind()
        clients = [store, other]
        answers = await asyncio.gather(
            *(clients[i % 2].add(k, "alice", f"d{i}", b"x", per_owner=100, total=150) for i in range(120))
        )
        assert answers.count("added") == 100 and answers.count("owner_full") == 20
        assert await store.count(k, "alice") == 100
        kept = f"d{answers.index('added')}"  # which 100 were added depends on who came first
        answers = await asyncio.gather(
            *(clients[i % 2].add(k, f"o{i}", "d", b"x", per_owner=100, total=150) for i in range(80))
        )
        assert answers.count("added") == 50 and answers.count("total_full") == 30
        assert await store.count(k) == 150
        # Past its bounds an existing record is still replaced: a revision needs no room
        assert await store.add(k, "alice", kept, b"new", per_owner=100, total=150) == "replaced"
        assert await store.get(k, "alice", kept) == b"new"
    finally:
        await other.close()


async def test_revisions_at_once_are_each_kept_by_compare_and_swap(store: Store) -> None:
    """Issue #64: 20 ``add-rules`` at once kept 2 of 21 rules (read, change, write). A revision swaps only the
    value it read; one that lost the race reads again and retries, so none is lost."""
    k = kind()
    await store.put(k, "alice", "rules", b"")

    async def append(rule: str) -> None:
        while True:
            old = await store.get(k, "alice", "rules")
            assert old is not None
            if await store.swap(k, "alice", "rules", old, old + rule.encode() + b";"):
                return

    await asyncio.gather(*(append(f"r{i}") for i in range(20)))
    kept = (await store.get(k, "alice", "rules") or b"").decode().split(";")[:-1]
    assert sorted(kept) == sorted(f"r{i}" for i in range(20))
    assert await store.swap(k, "alice", "rules", b"stale", b"lost") is False
    assert await store.swap(k, "alice", "missing", b"", b"x") is False
    assert await store.get(k, "alice", "missing") is None


def test_a_redis_url_redis_py_cannot_read_stops_the_start_and_shows_none_of_it() -> None:
    """Issue #64: a password with a "/" not percent-encoded started the server, then every dictionary route
    answered 500 and the log showed part of the password. It is now refused where the store is made."""
    from streamvoice.server.core.config import ServerConfig
    from streamvoice.settings import ConfigError

    with pytest.raises(ConfigError) as refused:
        ServerConfig(store_url="redis://:Pw9f/8e7dZQ@127.0.0.1:16399/0")
    assert "%2F" in str(refused.value) and "Pw9f" not in str(refused.value)


def test_the_embedded_file_is_the_owners_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #64: the SQLite file was 0644 in a 0755 folder: other local users read callers' prompts."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    embedded = open_store(None)

    async def use() -> None:
        await embedded.put("k", "o", "x", b"1")
        await embedded.close()

    asyncio.run(use())
    path = tmp_path / "streamvoice" / "store.sqlite3"
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700


async def test_more_calls_at_once_than_connections_wait_for_one(store: Store) -> None:
    """Issue #64: redis-py's pool answered 150 creations at once "Too many connections" (a 503); past its
    connections a call now waits for one."""
    k = kind()
    answers = await asyncio.gather(
        *(store.add(k, "alice", f"r{i}", b"x", per_owner=1000, total=1000) for i in range(150))
    )
    assert answers.count("added") == 150


async def test_counts_at_once_never_pass_their_limit_and_lose_nothing(store: Store) -> None:
    """Issue #67: a quota is a counter both replicas add to at once. ``tally`` adds only within the limit, in
    one step: 60 adds of 7 at once against 300 from two clients keep exactly the 42 that fit, none lost."""
    other = open_store(store.url)
    try:
        k = kind()
        clients = [store, other]
        answers = await asyncio.gather(
            *(clients[i % 2].tally(k, "alice", "chars", 7, 300, ttl_s=60) for i in range(60))
        )
        kept = [a for a in answers if a is not None]
        assert len(kept) == 300 // 7 and sorted(kept) == [7 * (i + 1) for i in range(300 // 7)]
        assert await store.get(k, "alice", "chars") == str(7 * (300 // 7)).encode()
        assert await store.tally(k, "alice", "chars", 300 - 7 * (300 // 7), 300) == 300  # exactly full
        assert await store.tally(k, "alice", "chars", 1, None) == 301  # unbounded: always counted
        assert (
            await store.tally(k, "bob", "chars", 5, 4) is None and await store.get(k, "bob", "chars") is None
        )
        assert await store.tally(k, "bob", "chars", 1, 4, ttl_s=0.05) == 1
        await asyncio.sleep(0.1)
        assert await store.get(k, "bob", "chars") is None  # a day's counter goes with its day
        assert await store.tally(k, "bob", "chars", 2, 4) == 2
    finally:
        await other.close()
