"""The agent's WebSocket: a caller's turns on one socket, audio as binary frames and the rest as JSON.

One conversation per socket unless a message names another. A prompt while an answer plays interrupts it
(the old turn ends with ``interrupted`` and what was heard), as does ``{"type": "interrupt"}``; the reader
never waits for a turn, so an interrupt lands at once. Every message gets one answer: its turn's events or
one ``error``. Checked by ``pytest tests/test_agent.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from streamvoice.agent.config import AgentConfig
from streamvoice.agent.conversations import Conversations
from streamvoice.agent.events import Event
from streamvoice.agent.pipeline import SpeechPipeline
from streamvoice.agent.requests import (
    Caller,
    ConversationRequest,
    bearer_caller,
    origin_allowed,
    parse_conversation,
    parse_turn_request,
    websocket_token,
)
from streamvoice.agent.turns import converse, interrupted_event
from streamvoice.protocol import ProtocolError
from streamvoice.store.keys import Keyring


async def accept_caller(websocket: WebSocket, config: AgentConfig, keyring: Keyring) -> Caller | None:
    """The socket accepted for a caller with the key from an allowed page, or closed 1008 (None)."""
    # Browsers send WebSockets cross-site without asking: only our own page and allowed origins.
    if not origin_allowed(websocket.headers.get("origin"), websocket.headers.get("host"), config):
        await websocket.close(1008, "origin not allowed")
        return None
    token, subprotocol = websocket_token(websocket.headers)
    try:
        caller = await bearer_caller(token, keyring)
    except ProtocolError:
        await websocket.close(1008, "unauthorized")
        return None
    await websocket.accept(subprotocol=subprotocol)
    return caller


class CallerSocket:
    """One caller's socket: reads messages, runs at most one turn at a time, answers in order."""

    def __init__(
        self,
        websocket: WebSocket,
        caller: Caller,
        conversations: Conversations,
        pipeline: SpeechPipeline,
        config: AgentConfig,
        take_turn: Callable[[], Callable[[], None]],
    ) -> None:
        self.websocket = websocket
        self.caller = caller
        self.conversations = conversations
        self.pipeline = pipeline
        self.config = config
        self.take_turn = take_turn  # room for a turn (``server_busy`` if none) and what gives it back
        self._sending = asyncio.Lock()  # a turn's events and the reader's answers never interleave a frame
        self._current: str | None = None  # the socket's conversation
        self._turn: asyncio.Task[None] | None = None

    async def run(self) -> None:
        try:
            while (raw := await _receive_any(self.websocket)) is not None:
                try:
                    await self._on_message(_loads(raw))
                except ProtocolError as exc:
                    await self.send({"type": "error", "code": str(exc.code), "message": exc.message})
        except WebSocketDisconnect:
            pass
        finally:
            if self._turn is not None:
                self._turn.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self._turn

    async def send(self, event: Event) -> None:
        async with self._sending:
            if event["type"] == "audio_chunk":
                await self.websocket.send_bytes(event["data"])
            else:
                await self.websocket.send_text(json.dumps(event))

    @property
    def _running(self) -> bool:
        return self._turn is not None and not self._turn.done()

    async def _on_message(self, payload: Any) -> None:
        asked = parse_conversation(payload, self._current, "the current conversation")
        running = self._running  # as the message arrived (the awaits below may see the turn end)
        if asked.interrupt_only:
            await self._interrupt(asked, running)
            return
        prompt, options = parse_turn_request(payload, self.config)
        conversation = await self.conversations.open(self.caller.owner, asked.id)
        self._current = conversation.id
        if running and self._turn is not None:
            await self.conversations.interrupt(conversation, asked.played_ms)
            await self._turn  # it ends with ``interrupted`` and gives its room back
        release = self.take_turn()
        events = converse(self.conversations, conversation, self.pipeline, prompt, options, asked.played_ms)
        self._turn = asyncio.create_task(self._speak(events, release))

    async def _interrupt(self, asked: ConversationRequest, running: bool) -> None:
        cut = await self.conversations.interrupt_named(self.caller.owner, asked.id, asked.played_ms)
        if not running or cut is None:  # else the turn itself says what was heard
            await self.send(interrupted_event(cut, asked.id))

    async def _speak(self, events: AsyncIterator[Event], release: Callable[[], None]) -> None:
        try:
            async for event in events:
                await self.send(event)
        finally:
            release()


async def _receive_any(websocket: WebSocket) -> str | bytes | None:
    message = await websocket.receive()
    if message["type"] == "websocket.disconnect":
        return None
    text = message.get("text")
    if isinstance(text, str):
        return text
    data = message.get("bytes")
    return data if isinstance(data, bytes) else b""


def _loads(raw: str | bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
