"""The embedded store: one SQLite file, in WAL mode so the processes of one machine share it. Calls run on a
worker thread (SQLite blocks), one at a time per process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from streamvoice.store import Added, StoreError, check_names, check_value

SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
  kind TEXT NOT NULL, owner TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL, expires REAL,
  PRIMARY KEY (kind, owner, key)
);
CREATE INDEX IF NOT EXISTS records_expiry ON records (kind, expires);
"""
LIVE = "(expires IS NULL OR expires > ?)"


def _use_wal(db: sqlite3.Connection, tries: int = 200) -> None:
    """WAL mode, once per file. Switching takes a lock SQLite's busy timeout does not wait for, and two
    processes (or two clients) opening a new file at once both switch: the one that finds it locked tries
    again, briefly (a file already in WAL is never switched)."""
    for _ in range(tries - 1):
        try:
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
            time.sleep(0.01)
    db.execute("PRAGMA journal_mode=WAL")


class SqliteStore:
    """``private_folder``: the folder is the store's own (the default), kept 0700; the file is 0600 either
    way, so other local users read neither callers' prompts nor their keys' digests (its WAL and shared-memory
    files take the file's mode)."""

    def __init__(self, path: Path, private_folder: bool = False) -> None:
        self.path = path
        self._private_folder = private_folder
        self.url = f"sqlite://{path}"
        self._db: sqlite3.Connection | None = None
        self._lock = asyncio.Lock()

    def _open(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                if self._private_folder:
                    self.path.parent.chmod(0o700)
                # Made 0600 only if it is new: opening and closing an existing file here would drop every
                # POSIX lock this process's other connections hold on it (SQLite's locks are fcntl locks,
                # released by closing any descriptor of the file: sqlite.org/howtocorrupt.html, 2.2), and
                # another process's writes then raced theirs: "database disk image is malformed" in the
                # suite, where servers in one process and `streamvoice serve` replicas share one file.
                with contextlib.suppress(FileExistsError):
                    os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
                self.path.chmod(0o600)
                db = sqlite3.connect(self.path, check_same_thread=False, timeout=10, isolation_level=None)
                _use_wal(db)
                db.executescript(SCHEMA)
            except (OSError, sqlite3.Error) as exc:
                raise StoreError(
                    f"the store {self.path} cannot be opened ({exc}): check the folder is writable, or set "
                    "STREAMVOICE_STORE_URL"
                ) from exc
            self._db = db
        return self._db

    async def _run(self, sql: str, *args: object) -> list[tuple[object, ...]]:
        """One statement, committed on its own."""
        return await self._on_thread(lambda db: db.execute(sql, args).fetchall())

    async def _transaction[T](self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` in one write transaction (``BEGIN IMMEDIATE``: other processes wait for it)."""

        def transaction(db: sqlite3.Connection) -> T:
            db.execute("BEGIN IMMEDIATE")
            try:
                result = work(db)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return result

        return await self._on_thread(transaction)

    async def _on_thread[T](self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` on the worker thread, one at a time per process; a failure is ``StoreError``."""

        def run() -> T:
            try:
                return work(self._open())
            except sqlite3.Error as exc:
                raise StoreError(f"the store {self.path} failed: {exc}") from exc

        async with self._lock:
            return await asyncio.to_thread(run)

    async def get(self, kind: str, owner: str, key: str) -> bytes | None:
        rows = await self._run(
            f"SELECT value FROM records WHERE kind=? AND owner=? AND key=? AND {LIVE}", kind, owner, key,
            time.time(),
        )  # fmt: skip
        value = rows[0][0] if rows else None
        return value if isinstance(value, bytes) else None

    async def put(self, kind: str, owner: str, key: str, value: bytes, ttl_s: float | None = None) -> None:
        check_names(kind, owner, key)
        check_value(value)
        now = time.time()
        expires = None if ttl_s is None else now + ttl_s
        await self._run("DELETE FROM records WHERE kind=? AND expires <= ?", kind, now)
        await self._run(
            "INSERT OR REPLACE INTO records (kind, owner, key, value, expires) VALUES (?, ?, ?, ?, ?)",
            kind, owner, key, value, expires,
        )  # fmt: skip

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
        expires = None if ttl_s is None else now + ttl_s

        def write(db: sqlite3.Connection) -> Added:
            def live(where: str, *params: object) -> int:
                """Live records of this kind, and ``where``."""
                sql = f"SELECT count(*) FROM records WHERE kind=? AND {LIVE}{where}"
                number: int = db.execute(sql, (kind, now, *params)).fetchone()[0]
                return number

            db.execute("DELETE FROM records WHERE kind=? AND expires <= ?", (kind, now))
            exists = live(" AND owner=? AND key=?", owner, key) > 0
            if exists and only_new:
                return "exists"
            if not exists:
                if live(" AND owner=?", owner) >= per_owner:
                    return "owner_full"
                if live("") >= total:
                    return "total_full"
            db.execute(
                "INSERT OR REPLACE INTO records (kind, owner, key, value, expires) VALUES (?, ?, ?, ?, ?)",
                (kind, owner, key, value, expires),
            )
            return "replaced" if exists else "added"

        return await self._transaction(write)

    async def swap(
        self, kind: str, owner: str, key: str, old: bytes, new: bytes, ttl_s: float | None = None
    ) -> bool:
        check_value(new)
        now = time.time()
        expires = None if ttl_s is None else now + ttl_s
        rows = await self._run(
            f"UPDATE records SET value=?, expires=? WHERE kind=? AND owner=? AND key=? AND value=? AND {LIVE} "
            "RETURNING key", new, expires, kind, owner, key, old, now,
        )  # fmt: skip
        return bool(rows)

    async def tally(
        self, kind: str, owner: str, key: str, amount: int, limit: int | None, ttl_s: float | None = None
    ) -> int | None:
        check_names(kind, owner, key)
        now = time.time()

        def count(db: sqlite3.Connection) -> int | None:
            row = db.execute(
                f"SELECT value, expires FROM records WHERE kind=? AND owner=? AND key=? AND {LIVE}",
                (kind, owner, key, now),
            ).fetchone()
            total = (int(row[0]) if row else 0) + amount
            if limit is not None and total > limit:
                return None
            expires = row[1] if row else (None if ttl_s is None else now + ttl_s)
            db.execute(
                "INSERT OR REPLACE INTO records (kind, owner, key, value, expires) VALUES (?, ?, ?, ?, ?)",
                (kind, owner, key, str(total).encode(), expires),
            )
            return total

        return await self._transaction(count)

    async def delete(self, kind: str, owner: str, key: str) -> bool:
        rows = await self._run(
            f"DELETE FROM records WHERE kind=? AND owner=? AND key=? AND {LIVE} RETURNING key", kind, owner,
            key, time.time(),
        )  # fmt: skip
        return bool(rows)

    async def keys(self, kind: str, owner: str) -> list[str]:
        rows = await self._run(
            f"SELECT key FROM records WHERE kind=? AND owner=? AND {LIVE} "
            "ORDER BY expires IS NULL, expires, key", kind, owner, time.time(),
        )  # fmt: skip
        return [str(r[0]) for r in rows]

    async def count(self, kind: str, owner: str | None = None) -> int:
        if owner is None:
            rows = await self._run(f"SELECT count(*) FROM records WHERE kind=? AND {LIVE}", kind, time.time())
        else:
            rows = await self._run(
                f"SELECT count(*) FROM records WHERE kind=? AND owner=? AND {LIVE}",
                kind,
                owner,
                time.time(),
            )
        number = rows[0][0]
        assert isinstance(number, int)
        return number

    async def close(self) -> None:
        async with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
