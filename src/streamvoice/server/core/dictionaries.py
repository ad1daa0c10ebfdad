"""Pronunciation dictionaries callers make through a wire's dictionary API, kept in the store (``streamvoice.store``) so
every replica reads what any of them made and a restart loses nothing.

A dictionary belongs to the caller whose key made it (``store.owner``) and to the wire's ``Shelf`` it was
made on (a wire names its own dictionaries; each wire's folder under ``server/surfaces`` declares its shelf).
Each change of its rules is a new version (a request may name one); the last ``MAX_VERSIONS`` are kept.
The record holds the rules as the caller sent them (each wire answers them back) and the lexicon they make
(``text.dictionary_rules``), which a request's resolution lays over the server's and the session's. Bounded:
dictionaries per caller and in all, rules per dictionary, dictionaries per request, each record's size (the
oldest versions go first when a revision would pass it).

Every bound is enforced where the write happens (``Store.add``), and every change is a compare-and-swap of
what was read (``Store.swap``), tried again on what another request wrote meanwhile: a count read before
its write let 120 creations at once keep 180 against 100, and 20 ``add-rules`` at once kept 2 of 21 rules.
Checked by ``pytest tests/test_dictionaries.py``.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.core.requests import Prepare, ResolvedRequest
from streamvoice.store import MAX_VALUE_BYTES, Added, Store

MAX_PER_CALLER = 100
MAX_IN_ALL = 10_000  # of one kind (a shelf's dictionaries, the named lexicons), every caller's together
MAX_CHANGE_TRIES = 64  # a change read again after another request changed the same dictionary first
MAX_VERSIONS = 8
MAX_PER_REQUEST = 3  # dictionaries one request may name (a shelf may allow fewer)
MAX_NAME_CHARS = 200
LEXICONS = "lexicon.session"  # our session protocol's named lexicons


@dataclass(frozen=True)
class Shelf:
    """One wire's dictionaries: where they are kept, and where a caller lists theirs (said when an id is not
    found)."""

    name: str
    listed_at: str  # e.g. "GET /dictionaries"
    per_request: int = MAX_PER_REQUEST


@dataclass(frozen=True)
class Version:
    id: str
    rules: list[dict[str, Any]]  # as the caller sent them, checked
    lexicon: dict[str, str]  # what they say: word -> "/phonemes/" or a respelling
    created_unix: int


@dataclass(frozen=True)
class Dictionary:
    id: str
    name: str
    created_unix: int
    versions: list[Version]  # oldest first; the last is the latest
    description: str | None = None
    archived_unix: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # what a wire keeps beside the rules (e.g. a pin)

    @property
    def latest(self) -> Version:
        return self.versions[-1]

    def version(self, version_id: object) -> Version:
        """The version a locator names (None: the latest), or ``not_found`` saying which are kept."""
        if version_id is None:
            return self.latest
        found = next((v for v in self.versions if v.id == version_id), None)
        if found is None:
            raise ProtocolError(
                ErrorCode.NOT_FOUND,
                f"dictionary {self.id!r} keeps no version {str(version_id)[:64]!r} (the last "
                f"{MAX_VERSIONS} are kept): its latest is {self.latest.id!r}",
            )
        return found

    def encode(self) -> bytes:
        return json.dumps(asdict(self), ensure_ascii=False).encode()

    def fitted(self) -> tuple[Dictionary, bytes]:
        """Itself as a record within the store's bound: its oldest versions dropped until it fits (a full
        dictionary can always be revised), or ``invalid_field`` when its latest alone is too large."""
        dictionary = self
        while len(encoded := dictionary.encode()) > MAX_VALUE_BYTES:
            if len(dictionary.versions) == 1:
                raise _bad(
                    f"these rules make a record of {len(encoded)} bytes, past the {MAX_VALUE_BYTES} one "
                    "dictionary may keep: send fewer or shorter rules"
                )
            dictionary = replace(dictionary, versions=dictionary.versions[1:])
        return dictionary, encoded

    def revised(self, rules: list[dict[str, Any]], lexicon: dict[str, str]) -> Dictionary:
        """New rules as a new version (the oldest past ``MAX_VERSIONS`` forgotten)."""
        version = Version(_new_id(""), rules, lexicon, int(time.time()))
        return replace(self, versions=[*self.versions, version][-MAX_VERSIONS:])

    @staticmethod
    def decode(raw: bytes) -> Dictionary:
        obj = json.loads(raw)
        return Dictionary(**{**obj, "versions": [Version(**v) for v in obj["versions"]]})


def _bad(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_FIELD, message)


def checked_name(raw: object, field_name: str = "name") -> str:
    if not isinstance(raw, str) or not raw.strip() or len(raw) > MAX_NAME_CHARS or not raw.isprintable():
        raise _bad(f'"{field_name}" must be text of 1-{MAX_NAME_CHARS} printable characters')
    return raw.strip()


def _refuse_past_bounds(added: Added, what: str, what_to_do: str) -> None:
    if added == "owner_full":
        raise _bad(f"you keep {MAX_PER_CALLER} {what}, the most one key may: {what_to_do}")
    if added == "total_full":
        raise ProtocolError(
            ErrorCode.SERVER_BUSY,
            f"this server keeps {MAX_IN_ALL} {what} in all, its most: {what_to_do}, or retry once others go",
        )


def _new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(10)


class Dictionaries:
    def __init__(self, store: Store) -> None:
        self.store = store

    @staticmethod
    def _kind(shelf: Shelf) -> str:
        return f"dictionary.{shelf.name}"

    async def create(
        self,
        owner: str,
        shelf: Shelf,
        name: str,
        rules: list[dict[str, Any]],
        lexicon: dict[str, str],
        description: str | None = None,
        id_prefix: str = "",
        extra: Mapping[str, Any] | None = None,
    ) -> Dictionary:
        now = int(time.time())
        made = Dictionary(
            _new_id(id_prefix),
            checked_name(name),
            now,
            [Version(_new_id(""), rules, lexicon, now)],
            description,
            extra=dict(extra or {}),
        )
        made, record = made.fitted()
        added = await self.store.add(
            self._kind(shelf), owner, made.id, record, per_owner=MAX_PER_CALLER, total=MAX_IN_ALL
        )
        _refuse_past_bounds(added, "pronunciation dictionaries", "delete or reuse one")
        return made

    async def get(self, owner: str, shelf: Shelf, dictionary_id: object) -> Dictionary:
        return Dictionary.decode(await self._raw(owner, shelf, dictionary_id))

    async def _raw(self, owner: str, shelf: Shelf, dictionary_id: object) -> bytes:
        raw = None
        if isinstance(dictionary_id, str) and 0 < len(dictionary_id) <= 100:
            raw = await self.store.get(self._kind(shelf), owner, dictionary_id)
        if raw is None:
            raise ProtocolError(
                ErrorCode.NOT_FOUND,
                f"no pronunciation dictionary {str(dictionary_id)[:64]!r} of yours: list yours at "
                + shelf.listed_at,
            )
        return raw

    async def all(self, owner: str, shelf: Shelf) -> list[Dictionary]:
        kind = self._kind(shelf)
        found = [await self.store.get(kind, owner, key) for key in await self.store.keys(kind, owner)]
        return sorted(
            (Dictionary.decode(raw) for raw in found if raw is not None), key=lambda d: d.created_unix
        )

    async def change(
        self, owner: str, shelf: Shelf, dictionary_id: object, edit: Callable[[Dictionary], Dictionary]
    ) -> Dictionary:
        """``edit`` applied to the dictionary as it is now, written only over what it read: when another
        request changed it first, read again and edit that (nothing lost, nothing stale written)."""
        kind = self._kind(shelf)
        for _ in range(MAX_CHANGE_TRIES):
            raw = await self._raw(owner, shelf, dictionary_id)
            changed, record = edit(Dictionary.decode(raw)).fitted()
            if await self.store.swap(kind, owner, changed.id, raw, record):
                return changed
        raise ProtocolError(
            ErrorCode.SERVER_BUSY,
            f"this dictionary changed {MAX_CHANGE_TRIES} times while your change was made; send it again",
        )

    async def delete(self, owner: str, shelf: Shelf, dictionary_id: str) -> None:
        await self.get(owner, shelf, dictionary_id)  # not_found when it is not the caller's
        await self.store.delete(self._kind(shelf), owner, dictionary_id)

    def laid_over(
        self, owner: str, shelf: Shelf, locators: Sequence[tuple[object, object]]
    ) -> Prepare | None:
        """What lays these dictionaries' words over a request's lexicon when awaited (an answer's
        ``prepare``: fetched before planning, never by a wire's reader); None when none is named. How many
        are named is checked now."""
        if not locators:
            return None
        if len(locators) > shelf.per_request:
            raise _bad(f"a request names at most {shelf.per_request} pronunciation dictionaries")

        async def prepare(request: ResolvedRequest) -> ResolvedRequest:
            """The dictionaries' words in order (a later one wins a word) over the request's lexicon:
            ``(id, version id or None for the latest)`` each."""
            merged = dict(request.lexicon)
            for dictionary_id, version_id in locators:
                dictionary = await self.get(owner, shelf, dictionary_id)
                merged.update(dictionary.version(version_id).lexicon)
            return replace(request, lexicon=merged)

        return prepare

    async def laid_over_now(
        self, request: ResolvedRequest, owner: str, shelf: Shelf, locators: Sequence[tuple[object, object]]
    ) -> ResolvedRequest:
        """``request`` with these dictionaries laid over it now (an HTTP body, read whole before its answer)."""
        prepare = self.laid_over(owner, shelf, locators)
        return request if prepare is None else await prepare(request)

    async def keep_lexicon(self, owner: str, name: str, lexicon: dict[str, str]) -> None:
        """A session's lexicon kept under a name of the caller's (``configure`` with ``lexicon_name``)."""
        record = json.dumps(lexicon, ensure_ascii=False).encode()
        added = await self.store.add(
            LEXICONS, owner, name, record, per_owner=MAX_PER_CALLER, total=MAX_IN_ALL
        )
        _refuse_past_bounds(added, "named lexicons", "reuse a name")

    async def kept_lexicon(self, owner: str, name: str) -> dict[str, str]:
        raw = await self.store.get(LEXICONS, owner, name)
        if raw is None:
            raise ProtocolError(
                ErrorCode.NOT_FOUND,
                f"no lexicon named {name!r} is kept for your key: send it once with "
                f'{{"type": "configure", "lexicon": {{...}}, "lexicon_name": "{name}"}}',
            )
        found: dict[str, str] = json.loads(raw)
        return found

    async def close(self) -> None:
        await self.store.close()
