"""A conversation, not a benchmark: the answer right after a barge-in starts as fast as a fresh session's,
measured against one in the same test (bench.barge_in holds it to 1.2x at p95)."""

from __future__ import annotations

import random
import statistics

import pytest

from streamvoice.bench.barge_in import after_barge_in, fresh_heard
from tests.helpers import RunningServer


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
