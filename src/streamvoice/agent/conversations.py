"""Conversations the agent holds: each caller's turns, so the language model answers in context, and what the
caller actually heard of an answer it interrupted.

A conversation id is the caller's (AgentCore's session id, or one it chose) or one the agent hands out
(unguessable). Conversations are kept per caller: the key is the caller's credential and the id together,
so an id that belongs to another caller names a different, empty conversation of one's own. Bounded on
every side: turns and characters of history (the oldest go first), conversations per caller (the caller's
own longest idle goes first), conversations in all (past it a new one is refused ``server_busy``: one
caller's activity never evicts another's history), and idle expiry. Only a turn opens a conversation: an
interrupt that names none of the caller's finds nothing and creates nothing.

An answer the caller interrupts (a new prompt while it plays, or an explicit interrupt) is stopped, and the
history keeps only what the caller heard of it, marked as cut off: the words at least half played by the
caller's player (``text.heard``), from the word times the speech server sent with the audio. Where the
caller does not say how much it played, the agent's own clock stands in: the caller plays audio as it
arrives.

What a conversation has said is kept in the store (``streamvoice.store``: SQLite on one machine, Redis for
replicas) each time a turn ends or is cut, and read back when a turn opens it, so a caller's next turn finds
its history on any replica and after a restart. A turn in progress is the replica's own: only finished turns
and what was heard of a cut one are shared (an interrupt reaches the turn where it plays). The store's
records expire with the same idle time, a caller past its bound loses its own oldest there too, and past the
bound on all conversations a new one is refused. Checked by ``pytest tests/test_conversation_history.py``.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.store import Store
from streamvoice.text.heard import split_written

MAX_ID_CHARS = 128
KIND = "conversation"  # the store's records: (caller, conversation id) -> its history


@dataclass(frozen=True)
class Entry:
    """One entry of a conversation's history."""

    role: Literal["user", "assistant"]
    text: str
    cut_off: bool = False  # an answer the caller interrupted: ``text`` is what it heard


@dataclass(frozen=True)
class WordTime:
    word: str
    start_ms: float
    end_ms: float


@dataclass(frozen=True)
class Interrupted:
    """What the caller heard of the answer it interrupted."""

    played_ms: float
    heard: str
    unheard: str


@dataclass
class Playing:
    """The answer being spoken (or still playing at the caller): what the turn sent so far."""

    prompt: str
    text: str = ""  # the model's answer as written, so far
    words: list[WordTime] = field(default_factory=list)  # ms from the answer's first audio
    audio_ms: float = 0.0  # relayed to the caller
    first_audio_at: float | None = None  # monotonic
    done: bool = False  # the turn ended (its audio may still be playing at the caller)
    stopped: asyncio.Event = field(default_factory=asyncio.Event)  # set to stop the turn
    cut: Interrupted | None = None  # what was heard, when it was interrupted

    def played_ms(self, reported: float | None, now: float) -> float:
        """How much of the answer the caller played: what it says (at most what was sent), else the
        agent's clock since the first audio."""
        if reported is not None:
            return min(reported, self.audio_ms)
        if self.first_audio_at is None:
            return 0.0
        return min((now - self.first_audio_at) * 1000, self.audio_ms)


@dataclass
class Conversation:
    id: str
    owner: str  # the caller's (``owner_of`` its credential)
    history: list[Entry] = field(default_factory=list)
    used_at: float = 0.0
    playing: Playing | None = None


@dataclass(frozen=True)
class Bounds:
    max_turns: int = 20  # history entries (a prompt and an answer are two)
    max_chars: int = 8_000  # of history in all
    idle_s: float = 1_800.0  # a conversation unused this long is forgotten
    max_conversations: int = 1_000  # in all; past it a new conversation is refused until some expire
    max_per_caller: int = 50  # per caller; past it the caller's own longest idle is forgotten


@dataclass
class _OwnerLock:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0  # opens holding or waiting for it: at 0 it is dropped, so locks never pile up


def encode_history(history: list[Entry]) -> bytes:
    return json.dumps([[s.role, s.text, s.cut_off] for s in history], ensure_ascii=False).encode()


def decode_history(raw: bytes) -> list[Entry]:
    return [Entry(role, text, bool(cut)) for role, text, cut in json.loads(raw)]


def conversation_id(raw: object, where: str = '"conversation"') -> str | None:
    """A caller's conversation id, checked: text of at most 128 printable characters, or None. ``where``
    names what carried it (a field, or AgentCore's session header) in the refusal."""
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw.strip() or len(raw) > MAX_ID_CHARS or not raw.isprintable():
        raise ProtocolError(
            ErrorCode.INVALID_FIELD,
            f"{where} must be an id of at most {MAX_ID_CHARS} printable characters (leave it out to start "
            "a new conversation; the agent answers its id)",
        )
    return raw.strip()


class Conversations:
    def __init__(
        self, store: Store, bounds: Bounds = Bounds(), clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.store = store
        self.bounds = bounds
        self._clock = clock
        self._held: OrderedDict[tuple[str, str], Conversation] = OrderedDict()  # oldest used first
        self._per_caller: Counter[str] = Counter()
        self._locks: dict[str, _OwnerLock] = {}  # a caller's opens, one at a time (dropped when unused)

    def __len__(self) -> int:
        return len(self._held)

    async def open(self, owner: str, cid: str | None) -> Conversation:
        """The caller's conversation with this id (a new one, with a new id, when None), its history as the
        store has it (another replica may have added to it), or ``server_busy`` when a new one would pass
        the bound on all conversations.

        One caller's opens run one at a time (a lock per caller), and a new conversation takes its place in
        memory before any await, so the bounds are checked and counted as one step: eight turns at once
        naming one new id once drifted the count to 57 and then failed every new conversation
        (``tests/test_conversation_history.py::test_simultaneous_turns_on_one_new_id_count_it_once``)."""
        lock = self._locks.setdefault(owner, _OwnerLock())
        lock.users += 1
        try:
            async with lock.lock:
                return await self._open(owner, cid)
        finally:
            lock.users -= 1
            if lock.users == 0:
                del self._locks[owner]

    async def _open(self, owner: str, cid: str | None) -> Conversation:
        now = self._clock()
        self._expire(now)
        cid = cid or secrets.token_urlsafe(16)
        key = (owner, cid)
        conversation = self._held.get(key)
        new = conversation is None
        if conversation is None:
            conversation = self._take_place(owner, cid, now)  # no await between the checks and the count
        try:
            stored = await self.store.get(KIND, owner, cid)
            if new and stored is None:
                await self._add_to_store(conversation)
        except BaseException:
            if new and self._held.get(key) is conversation:
                self._forget(key)  # what this open reserved is given back on every path out
            raise
        if stored is not None and conversation.playing is None:
            conversation.history = decode_history(stored)
        conversation.used_at = now
        if self._held.get(key) is conversation:
            self._held.move_to_end(key)
        else:  # forgotten while the store answered (idle past expiry): held again
            self._held[key] = conversation
            self._per_caller[owner] += 1
        await self._save(conversation)
        return conversation

    def _take_place(self, owner: str, cid: str, now: float) -> Conversation:
        """A new conversation's place in memory, its bounds checked and counted at once: the caller's own
        longest idle goes past its bound; past the bound on all a new one is refused."""
        if self._per_caller[owner] >= self.bounds.max_per_caller:
            oldest = next((k for k in self._held if k[0] == owner), None)
            if oldest is not None:
                self._forget(oldest)
        if len(self._held) >= self.bounds.max_conversations:
            raise self._full()
        conversation = Conversation(cid, owner, used_at=now)
        self._held[(owner, cid)] = conversation
        self._per_caller[owner] += 1
        return conversation

    def _full(self) -> ProtocolError:
        return ProtocolError(
            ErrorCode.SERVER_BUSY,
            f"the agent holds {self.bounds.max_conversations} conversations; continue one of yours "
            f"(send its id) or retry once idle ones expire ({self.bounds.idle_s:g} s unused)",
        )

    async def _add_to_store(self, conversation: Conversation) -> None:
        """The bounds across replicas, checked where the record is written (``Store.add``): the caller's own
        oldest goes past its bound; past the bound on all a new one is refused (never another caller's
        evicted)."""
        bounds, owner = self.bounds, conversation.owner
        record = encode_history(conversation.history)
        for _ in range(3):  # another replica may add one of the caller's between the eviction and the add
            mine = await self.store.keys(KIND, owner)
            for oldest in mine[: max(0, len(mine) - bounds.max_per_caller + 1)]:
                await self.store.delete(KIND, owner, oldest)
            added = await self.store.add(
                KIND, owner, conversation.id, record, ttl_s=bounds.idle_s,
                per_owner=bounds.max_per_caller, total=bounds.max_conversations,
            )  # fmt: skip
            if added == "total_full":
                raise self._full()
            if added != "owner_full":
                return
        raise self._full()

    async def _save(self, conversation: Conversation) -> None:
        await self.store.put(
            KIND,
            conversation.owner,
            conversation.id,
            encode_history(conversation.history),
            ttl_s=self.bounds.idle_s,
        )

    def find(self, owner: str, cid: str | None) -> Conversation | None:
        """The caller's conversation with this id if this replica holds it: an interrupt never creates one,
        and reaches the turn where it plays."""
        if cid is None:
            return None
        self._expire(self._clock())
        return self._held.get((owner, cid))

    def _forget(self, key: tuple[str, str]) -> None:
        del self._held[key]
        self._per_caller[key[0]] -= 1
        if self._per_caller[key[0]] <= 0:
            del self._per_caller[key[0]]

    def history(self, owner: str, cid: str) -> list[Entry]:
        """What the model will be given as the conversation's past (tests read it here)."""
        conversation = self._held.get((owner, cid))
        return list(conversation.history) if conversation is not None else []

    async def interrupt_named(
        self, owner: str, cid: str | None, played_ms: float | None
    ) -> Interrupted | None:
        """An interrupt that is its own message (over HTTP or the socket): the caller's conversation with this id
        stopped where this replica holds it (``find``: never created), what was heard of it if it played."""
        found = self.find(owner, cid)
        return await self.interrupt(found, played_ms) if found is not None else None

    async def interrupt(self, conversation: Conversation, played_ms: float | None) -> Interrupted | None:
        """Stop the answer playing, if one is, and keep in the history only what the caller heard of it."""
        playing = conversation.playing
        if playing is None:
            return None
        conversation.playing = None
        played = playing.played_ms(played_ms, self._clock())
        if playing.done and played >= playing.audio_ms:
            return None  # it had all been played: the whole answer stays in the history
        heard, unheard = split_written(playing.text, playing.words, played)
        if playing.done:  # its answer was recorded whole when the turn ended: keep only what was heard
            if conversation.history and conversation.history[-1].role == "assistant":
                conversation.history.pop()
        else:
            self._add(conversation, Entry("user", playing.prompt))
        playing.cut = Interrupted(round(played, 1), heard, unheard)
        playing.stopped.set()
        if heard.strip():
            self._add(conversation, Entry("assistant", heard.strip(), cut_off=True))
        await self._save(conversation)
        return playing.cut

    async def answered(self, conversation: Conversation, playing: Playing) -> None:
        """The turn ended with its whole answer sent: it joins the history (an interrupt may still cut it)."""
        playing.done = True
        self._add(conversation, Entry("user", playing.prompt))
        if playing.text.strip():
            self._add(conversation, Entry("assistant", playing.text.strip()))
        await self._save(conversation)

    def _add(self, conversation: Conversation, said: Entry) -> None:
        history = conversation.history
        history.append(said)
        while len(history) > self.bounds.max_turns or (
            len(history) > 1 and sum(len(s.text) for s in history) > self.bounds.max_chars
        ):
            history.pop(0)
        if history and sum(len(s.text) for s in history) > self.bounds.max_chars:
            last = history[-1]  # one entry longer than all the room: its end is what matters next
            history[-1] = Entry(last.role, last.text[-self.bounds.max_chars :], last.cut_off)

    def _expire(self, now: float) -> None:
        while self._held:
            key, oldest = next(iter(self._held.items()))
            if now - oldest.used_at <= self.bounds.idle_s:
                return
            self._forget(key)
