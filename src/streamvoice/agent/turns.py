"""One turn of a conversation: the answer's events for the caller, what it said recorded as it goes (text, word
times, audio relayed), stopped at once when the caller interrupts it, and its place in the history after.
Every agent route (SSE, WebSocket, the AgentCore entry point) runs its turns through ``converse``. Checked by
``pytest tests/test_conversation_history.py``."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from streamvoice.agent import events as ev
from streamvoice.agent.conversations import Conversation, Conversations, Interrupted, Playing, WordTime
from streamvoice.agent.pipeline import SpeechPipeline, TurnOptions


def heard_part(cut: Interrupted) -> ev.HeardPart:
    return ev.HeardPart(played_ms=cut.played_ms, heard=cut.heard, unheard=cut.unheard)


def interrupted_event(cut: Interrupted | None, conversation: str | None = None) -> ev.Interrupted:
    """What was heard of the answer an interrupt stopped (nothing, when none was playing); ``conversation``
    named when the interrupt was its own message rather than the end of a turn's events."""
    part = heard_part(cut) if cut is not None else ev.HeardPart(played_ms=0.0, heard="", unheard="")
    event = ev.Interrupted(
        type="interrupted", played_ms=part["played_ms"], heard=part["heard"], unheard=part["unheard"]
    )
    if conversation is not None:
        event["conversation"] = conversation
    return event


def observe(playing: Playing, event: ev.Event) -> None:
    """What the turn has sent the caller so far, for a later interrupt."""
    if event["type"] == "text_delta":
        playing.text += event["text"]
    elif event["type"] == "alignment":
        playing.words += [WordTime(w["word"] or "", w["start_ms"], w["end_ms"]) for w in event["words"]]
    elif event["type"] == "audio_chunk":
        if playing.first_audio_at is None:
            playing.first_audio_at = time.monotonic()
        playing.audio_ms += ev.pcm_ms(len(event["data"]))


async def converse(
    conversations: Conversations,
    conversation: Conversation,
    pipeline: SpeechPipeline,
    prompt: str,
    options: TurnOptions,
    played_ms: float | None = None,
) -> AsyncIterator[ev.Event]:
    """The turn's events, first ``conversation`` (its id, and what was heard of the answer this prompt
    interrupted, if one was playing); an interrupt from elsewhere ends them with ``interrupted``."""
    cut = await conversations.interrupt(conversation, played_ms)
    history = list(conversation.history)
    playing = Playing(prompt)
    conversation.playing = playing
    opened = ev.ConversationOpened(type="conversation", id=conversation.id)
    if cut is not None:
        opened["interrupted"] = heard_part(cut)
    yield opened
    events = aiter(pipeline.run(prompt, options, history))
    stop = asyncio.ensure_future(playing.stopped.wait())
    try:
        while True:
            following = asyncio.ensure_future(anext(events))
            await asyncio.wait({following, stop}, return_when=asyncio.FIRST_COMPLETED)
            if not following.done():
                following.cancel()
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                    await following
                yield interrupted_event(playing.cut)
                return
            try:
                event = following.result()
            except StopAsyncIteration:
                break
            observe(playing, event)
            yield event
        if not playing.stopped.is_set():
            await conversations.answered(conversation, playing)
    finally:
        stop.cancel()
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()
