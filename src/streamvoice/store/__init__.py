"""What callers make, kept: records by kind, owner and key, with an optional expiry, in one small interface
and two real backends. SQLite in the user's data folder is the embedded default (one machine keeps what was
made across restarts; processes on it share the file); Redis (``redis://``) is for replicas, which share
what any of them made. Nothing here knows what a record means: the server keeps pronunciation dictionaries
in it, the agent its conversations. Checked by ``pytest tests/test_store.py`` (both backends, a real
``redis-server``)."""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Literal, Protocol
from urllib.parse import unquote, urlparse

from streamvoice.protocol.errors import ErrorCode, ProtocolError

MAX_VALUE_BYTES = 512 * 1024  # one record; a caller's input is checked smaller than this before it gets here
MAX_NAME_CHARS = 200  # kind, owner and key each


log = logging.getLogger("streamvoice.store")

UNAVAILABLE = "the store of dictionaries and conversations did not answer; retry shortly"


class StoreError(ProtocolError):
    """The store cannot be reached or read. A ``ProtocolError`` (``store_unavailable``, 503: retry), so every
    surface answers it in its own shape; the caller is told to retry and nothing more (no host, port, path
    or password), the operator reads which store failed and what to check in the server's log."""

    def __init__(self, detail: str) -> None:
        super().__init__(ErrorCode.STORE_UNAVAILABLE, UNAVAILABLE)
        self.detail = detail
        log.error("%s", detail)


# What ``Store.add`` did: a new record, an existing one replaced, or nothing (it exists, or which bound it
# would pass).
Added = Literal["added", "replaced", "exists", "owner_full", "total_full"]


class Store(Protocol):
    """Records ``(kind, owner, key) -> bytes``. ``ttl_s`` None keeps a record until it is deleted; a record
    past its expiry is never returned and is not counted.

    Every bound on what callers keep is enforced where the write happens, atomically, on both backends
    (``add``: a conditional insert in SQLite's transaction, a script in Redis), and every revision is a
    compare-and-swap (``swap``): a count read before the write it bounds let 120 creations at once keep 180
    against 100, and 20 revisions at once kept 2 of 21 rules (``tests/test_store.py``)."""

    url: str

    async def get(self, kind: str, owner: str, key: str) -> bytes | None: ...

    async def put(
        self, kind: str, owner: str, key: str, value: bytes, ttl_s: float | None = None
    ) -> None: ...

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
        """Put the record if it exists (``replaced``; with ``only_new``, nothing: ``exists``) or if the owner holds fewer than ``per_owner`` and
        everyone fewer than ``total`` records of this kind (``added``); else nothing is written and the
        answer names the bound. Checked and written as one step across processes and replicas."""
        ...

    async def swap(
        self, kind: str, owner: str, key: str, old: bytes, new: bytes, ttl_s: float | None = None
    ) -> bool:
        """Replace the record with ``new`` only if it still holds ``old`` (a revision of what was read);
        False, and nothing written, when it changed or is gone meanwhile."""
        ...

    async def tally(
        self, kind: str, owner: str, key: str, amount: int, limit: int | None, ttl_s: float | None = None
    ) -> int | None:
        """Add ``amount`` to the counter record (0 when absent; ``ttl_s`` from its first count) if the sum
        stays within ``limit`` (None: no bound) and answer the new sum; else None, and nothing added. Checked
        and added as one step across processes and replicas: a quota cannot be passed by callers racing."""
        ...

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

        return SqliteStore(default_path(), private_folder=True)
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


def shown_owner(owner_digest: str) -> str:
    """What an answer shows as a record's owner (ElevenLabs' ``created_by``, Cartesia's ``owner_id``): a
    digest of the owner's digest, so no answer carries the value that names the key's records in the
    store (``sha256(key)[:32]``, which a weak key could be guessed back from)."""
    return hashlib.sha256(b"streamvoice shown owner:" + owner_digest.encode()).hexdigest()[:24]
