"""A session's streamed messages: a ``synthesize`` with ``"stream": true`` takes its text in ``append``
messages as an LLM writes it, ``flush`` speaks what is buffered, ``end`` completes it. The utterance
chunks it (fast first piece, the quiet cut); this module only finds the message an ``append`` names and
bounds what one stream can hold:

- at most ``max_stream_chars`` of text: the ``append`` that passes it is refused (``text_too_long``), what
  came before is spoken and the message completes;
- a stream with no text for ``stream_text_timeout_s`` is ended as it stands (it completes with what it had),
  so a client that never sends ``end`` does not hold its listener slot.

Problems with an ``append``, ``flush`` or ``end`` are answered ``error`` with the message's ``id`` and no
``sequence``, in order (after the answers of the messages queued before): the message itself still gets its
one answer. Checked by ``pytest tests/test_session_stream.py``.
"""

from __future__ import annotations

import asyncio
import contextlib

from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.session_message import Message


class StreamedMessages:
    def __init__(self, max_chars: int, quiet_timeout_s: float) -> None:
        self.max_chars = max_chars
        self.timeout_s = quiet_timeout_s
        self._open: list[Message] = []
        self._timers: dict[int, asyncio.TimerHandle] = {}

    def start(self, job: Message, text: str) -> None:
        self._open.append(job)
        if text:
            job.utterance.append(text)
        self._arm(job)

    def append(self, uid: str | None, text: str) -> None:
        job = self._find(uid)
        if job.utterance.chars + len(text) > self.max_chars:
            self.end(uid)
            raise ProtocolError(
                ErrorCode.TEXT_TOO_LONG,
                f"this streamed message passed {self.max_chars} characters: what came before is spoken and "
                "the message completes; send the rest as a new synthesize",
                job.id,
            )
        job.utterance.append(text)
        self._arm(job)

    def flush(self, uid: str | None) -> None:
        self._find(uid).utterance.flush()

    def end(self, uid: str | None) -> None:
        job = self._find(uid)
        self._close(job)

    def forget(self, job: Message) -> None:
        """The message was answered (or cancelled): nothing more can be streamed into it."""
        if job in self._open:
            self._close(job)

    def _close(self, job: Message) -> None:
        job.utterance.end()
        with contextlib.suppress(ValueError):
            self._open.remove(job)
        timer = self._timers.pop(id(job), None)
        if timer is not None:
            timer.cancel()

    def _find(self, uid: str | None) -> Message:
        for job in reversed(self._open):
            if (uid is None or job.id == uid) and not job.cancelled:
                return job
        named = f' with "id": {uid!r}' if uid is not None else ""
        raise ProtocolError(
            ErrorCode.INVALID_MESSAGE,
            f"no streamed message{named} is open: start one with "
            '{"type": "synthesize", "stream": true, "id": ...}',
            uid,
        )

    def _arm(self, job: Message) -> None:
        timer = self._timers.pop(id(job), None)
        if timer is not None:
            timer.cancel()
        loop = asyncio.get_running_loop()
        self._timers[id(job)] = loop.call_later(self.timeout_s, self.forget, job)
