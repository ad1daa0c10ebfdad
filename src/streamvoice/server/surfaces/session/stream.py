"""A session's streamed messages: a ``synthesize`` with ``"stream": true`` takes its text in ``append``
messages as an LLM writes it, ``flush`` speaks what is buffered, ``end`` completes it. The utterance
chunks it (fast first piece, the quiet cut) and bounds it (``utterance_bounds.StreamBounds``: at most
``max_stream_chars``, ended as it stands after ``stream_text_timeout_s`` without text); this module only
finds the message an ``append`` names.

Problems with an ``append``, ``flush`` or ``end`` are answered ``error`` with the message's ``id`` and no
``sequence``, in order (after the answers of the messages queued before): the message itself still gets its
one answer. Checked by ``pytest tests/test_session_stream.py``.
"""

from __future__ import annotations

import contextlib

from streamvoice.protocol import ErrorCode, ProtocolError
from streamvoice.server.surfaces.session.message import Message


class StreamedMessages:
    def __init__(self) -> None:
        self._open: list[Message] = []

    def start(self, message: Message, text: str) -> None:
        """``text``: the opening text. Past the stream's whole cap it is that message's one answer,
        ``text_too_long``, raised here by the utterance's own bound (``StreamBounds``)."""
        if text:
            message.utterance.append(text)
        self._open.append(message)

    def append(self, uid: str | None, text: str) -> None:
        message = self._find(uid)
        try:
            message.utterance.append(text)
        except ProtocolError as exc:
            raise exc.naming(id=message.id) from None

    def flush(self, uid: str | None) -> None:
        self._find(uid).utterance.flush()

    def end(self, uid: str | None) -> None:
        self.forget(self._find(uid))

    def end_all(self) -> None:
        """The client closed the session: no more text can come, so each open stream is spoken as it
        stands now, not after ``stream_text_timeout_s`` (which held the listener slot that long)."""
        for message in list(self._open):
            self.forget(message)

    def forget(self, message: Message) -> None:
        """The message was answered, ended or cancelled: nothing more can be streamed into it."""
        message.utterance.end()
        with contextlib.suppress(ValueError):
            self._open.remove(message)

    def _find(self, uid: str | None) -> Message:
        for message in reversed(self._open):
            if (uid is None or message.id == uid) and not message.cancelled and not message.utterance.ended:
                return message
        named = f' with "id": {uid!r}' if uid is not None else ""
        raise ProtocolError(
            ErrorCode.INVALID_MESSAGE,
            f"no streamed message{named} is open: start one with "
            '{"type": "synthesize", "stream": true, "id": ...}',
            uid,
        )
