"""``server.surfaces.rendering``: the one loop from an utterance's events to any wire: audio encoded in the
caller's format, every window's samples accounted for (an encoder that holds them gives no bytes yet), the
encoder's tail before the end, the first audio timed once."""

from __future__ import annotations

from streamvoice.engine.voices import VoiceSpec
from streamvoice.server.core.events import Completed, PieceEnded, PieceStarted
from streamvoice.server.core.lane import Lane
from streamvoice.server.core.piece_audio import Words
from streamvoice.server.core.requests import ResolvedRequest
from streamvoice.server.core.utterance import Utterance
from streamvoice.server.surfaces.rendering import Sound, encoded_events
from tests.fakes import FakeEngine, FakeHost, FakePieceSource


async def _events(fmt: str) -> tuple[list[object], list[int]]:
    host = FakeHost(engine=FakeEngine(windows_per_piece=2, window_samples=2_400, words=True))
    host.scheduler.start()
    request = ResolvedRequest(VoiceSpec((("af_heart", 1.0),)), 1.0, fmt, "en-us", text="One two. Three.")
    utterance = Utterance(FakePieceSource(), request, Lane(host))
    utterance.say()
    first: list[int] = []
    events = [e async for e in encoded_events(utterance, request, lambda: first.append(1))]
    host.scheduler.stop()
    return events, first


async def test_pcm_is_encoded_in_speaking_order_and_first_audio_is_timed_once() -> None:
    events, first = await _events("pcm")
    kinds = [type(e).__name__ for e in events]
    assert kinds[:3] == ["PieceStarted", "Words", "Sound"] and isinstance(events[-1], Completed)
    assert kinds.count("PieceStarted") == kinds.count("PieceEnded") == 2
    sounds = [e for e in events if isinstance(e, Sound)]
    assert all(len(s.data) == 2 * s.samples for s in sounds)  # 16-bit samples, none held back
    assert first == [1]


async def test_an_encoder_that_holds_audio_still_accounts_for_every_sample() -> None:
    events, first = await _events("mp3")
    sounds = [e for e in events if isinstance(e, Sound)]
    done = events[-1]
    assert isinstance(done, Completed) and first == [1]
    assert sum(s.samples for s in sounds) == done.samples  # every window reaches the wire's clock
    assert sounds[-1].samples == 0 and sounds[-1].data  # the encoder's tail, before the end
    assert all(isinstance(e, (PieceStarted, PieceEnded, Words, Sound, Completed)) for e in events)
