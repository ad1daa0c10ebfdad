"""A conversation, not a benchmark: the answer right after a barge-in starts as fast as a fresh session's,
measured against one in the same test (bench.barge_in holds it to 1.2x at p95); and a reply whose text
stops after a finished sentence is spoken without waiting for the model to end its turn."""

from __future__ import annotations

import asyncio
import random
import statistics
from collections.abc import AsyncIterator

import httpx
import pytest

from streamvoice.agent.llm import split_tokens
from streamvoice.bench.barge_in import after_barge_in, fresh_heard
from streamvoice.client.sse import iter_sse
from tests.helpers import RunningServer, start_agent


@pytest.mark.slow
async def test_the_answer_after_a_barge_in_starts_like_a_fresh_one(speech_server: RunningServer) -> None:
    rng = random.Random(3)
    await fresh_heard(speech_server.ws_url)
    fresh, after = [], []
    for _ in range(3):
        fresh.append(await fresh_heard(speech_server.ws_url))
        after.append(await after_barge_in(speech_server.ws_url, rng))
    # before the decoder window in flight could be stopped: 2.4x at the median (396 vs 168 ms)
    assert statistics.median(after) <= 1.5 * statistics.median(fresh) + 60, (fresh, after)


class _WritesThenPauses:
    """A language model that writes one sentence word by word and then holds its turn open, silent."""

    name = "writes-then-pauses"

    def __init__(self, text: str, pause_s: float) -> None:
        self.text, self.pause_s = text, pause_s

    async def stream(self, prompt: str) -> AsyncIterator[str]:
        for token in split_tokens(self.text):
            await asyncio.sleep(0.12)
            yield token
        await asyncio.sleep(self.pause_s)


@pytest.mark.slow
def test_the_agent_speaks_a_finished_sentence_when_its_model_goes_quiet(speech_server: RunningServer) -> None:
    """Over the session protocol, the agent's chunker decided a sentence's end only on the next character:
    a reply that stops after "evening." was silent until the model ended its turn."""
    reply = "I can book a table for four people at seven thirty this evening."
    agent = start_agent(_WritesThenPauses(reply, pause_s=6.0), speech_server.url)
    try:
        with httpx.stream(
            "POST", agent.url + "/invocations", json={"prompt": "Book it.", "mode": "bidi"}, timeout=60
        ) as r:
            assert r.status_code == 200
            events = [e.json() for e in iter_sse(r.iter_raw())]
    finally:
        agent.stop()
    last_text = max(e["t_ms"] for e in events if e["type"] == "text_delta")
    first_audio = min(e["t_ms"] for e in events if e["type"] == "audio_chunk")
    assert events[-1]["type"] == "agent_end" and events[-1]["text"] == reply
    assert first_audio - last_text < 1500, "spoken after the quiet, not when the model ended its turn"
