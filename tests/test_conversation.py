"""A conversation with the agent: a reply whose text stops after a finished sentence is spoken without
waiting for the model to end its turn. (How soon the answer after a barge-in starts beside a fresh one is
``python -m streamvoice.bench.barge_in``'s figure; the mechanism is tested where it lives:
``test_streaming_engine.py::test_a_stopped_run_ends_the_model_call_in_flight``,
``test_lane.py::test_after_a_barge_in_the_next_answer_is_due_now``.)"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import httpx

from streamvoice.agent.llm import split_tokens
from streamvoice.client.sse import iter_sse
from tests.helpers import RunningServer, start_agent


class _WritesThenPauses:
    """A language model that writes one sentence word by word and then holds its turn open, silent, until
    the caller has heard audio (``heard`` set) or two minutes pass."""

    name = "writes-then-pauses"

    def __init__(self, text: str, heard: threading.Event) -> None:
        self.text, self.heard = text, heard
        self.released_by_audio: bool | None = None

    async def stream(self, prompt: str, history: Any = ()) -> AsyncIterator[str]:
        for token in split_tokens(self.text):
            await asyncio.sleep(0.12)
            yield token
        self.released_by_audio = await asyncio.to_thread(self.heard.wait, 120)


def test_the_agent_speaks_a_finished_sentence_when_its_model_goes_quiet(speech_server: RunningServer) -> None:
    """Over the session protocol, the agent's chunker decided a sentence's end only on the next character:
    a reply that stops after "evening." was silent until the model ended its turn. Here the model's turn
    stays open until the caller hears audio: it is heard while the model is still quiet, or never."""
    reply = "I can book a table for four people at seven thirty this evening."
    heard = threading.Event()
    source = _WritesThenPauses(reply, heard)
    agent = start_agent(source, speech_server.url)
    events = []
    try:
        with httpx.stream(
            "POST", agent.url + "/invocations", json={"prompt": "Book it.", "mode": "bidi"}, timeout=180
        ) as r:
            assert r.status_code == 200
            for event in iter_sse(r.iter_raw()):
                events.append(event.json())
                if events[-1]["type"] == "audio_chunk":
                    heard.set()
    finally:
        agent.stop()
    assert source.released_by_audio is True, "spoken only when the model ended its turn"
    assert events[-1]["type"] == "agent_end" and events[-1]["text"] == reply
