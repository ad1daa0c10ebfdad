"""What callers make, kept: records by kind, owner and key, with an optional expiry, in one small interface
and two real backends. SQLite in the user's data folder is the embedded default (one machine keeps what was
made across restarts; processes on it share the file); Redis (``redis://``) is for replicas, which share
what any of them made. Nothing here knows what a record means: the server keeps pronunciation dictionaries
in it, the agent its conversations. Checked by ``pytest tests/test_store.py`` (both backends, a real
``redis-server``)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlparse

from streamvoice.protocol.errors import ErrorCode, ProtocolError

MAX_VALUE_BYTES = 512 * 1024  # one record; a caller's input is checked smaller than this before it gets here
MAX_NAME_CHARS = 200  # kind, owner and key each


class StoreError(ProtocolError):
    """The store cannot be reached or read; the message says which store and what to check. A
    ``ProtocolError`` (``store_unavailable``, 503: retry), so every surface answers it in its own shape."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.STORE_UNAVAILABLE, message)


class Store(Protocol):
    """Records ``(kind, owner, key) -> bytes``. ``ttl_s`` None keeps a record until it is deleted; a record
    past its expiry is never returned and is not counted."""

    url: str

    async def get(self, kind: str, owner: str, key: str) -> bytes | None: ...

    async def put(
        self, kind: str, owner: str, key: str, value: bytes, ttl_s: float | None = None
    ) -> None: ...

    async def delete(self, kind: str, owner: str, key: str) -> bool: ...

    async def keys(self, kind: str, owner: str) -> list[str]:
        """The owner's live keys of this kind, soonest to expire first (those that never expire last)."""
        ...

    async def count(self, kind: str, owner: str | None = None) -> int:
        """Live records of this kind: the owner's, or everyone's when ``owner`` is None."""
        ...

    async def close(self) -> None: ...


def default_path() -> Path:
    """The embedded store's file: ``$XDG_DATA_HOME/streamvoice/store.sqlite3`` (``~/.local/share`` unset)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "streamvoice" / "store.sqlite3"


def open_store(url: str | None) -> Store:
    """The store a URL names: ``redis://host:port/db`` (or ``rediss://``), ``sqlite:///path/to/file``, or
    None for the embedded default. Nothing is connected until the first call."""
    if not url:
        from streamvoice.store.sqlite import SqliteStore

        return SqliteStore(default_path())
    parsed = urlparse(url)
    if parsed.scheme in ("redis", "rediss", "unix"):
        from streamvoice.store.redis import RedisStore

        return RedisStore(url)
    if parsed.scheme == "sqlite" and parsed.path:
        from streamvoice.store.sqlite import SqliteStore

        return SqliteStore(Path(unquote(parsed.path)))
    raise ValueError(
        f"STREAMVOICE_STORE_URL (scheme {parsed.scheme[:20]!r}; the URL is not shown: it may hold a password) names no store: use redis://HOST:6379/0 (replicas share it) or "
        "sqlite:///path/to/store.sqlite3 (one machine); leave it unset for the embedded default"
    )


def check_names(*names: str) -> None:
    for name in names:
        if not name or len(name) > MAX_NAME_CHARS or "\x00" in name:
            raise ValueError(f"a store name must be 1-{MAX_NAME_CHARS} characters without NUL")


def check_value(value: bytes) -> None:
    if len(value) > MAX_VALUE_BYTES:
        raise ValueError(f"a stored record is at most {MAX_VALUE_BYTES} bytes (this one: {len(value)})")


def owner(credential: str | None) -> str:
    """Whom a record belongs to: a digest of the key the caller presented (never the key itself), so what one
    key made is that key's alone, on every replica."""
    return hashlib.sha256((credential or "").encode()).hexdigest()[:32]
