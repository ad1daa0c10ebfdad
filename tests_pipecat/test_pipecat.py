"""The Pipecat service, driven by the real ``pipecat-ai`` with its own ``run_test`` harness."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from pipecat.frames.frames import (
    ErrorFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.tests.utils import SleepFrame, run_test
from tests.helpers import RunningServer, metric

from streamvoice.integrations.pipecat import StreamvoiceTTSService

REPLY = "Your package left the warehouse this morning. It should arrive on Thursday afternoon."
START = 60.0  # run_test's pipeline start, generous for a loaded 2-core machine


def by_context(frames: Sequence[Frame]) -> dict[str, list[Frame]]:
    out: dict[str, list[Frame]] = {}
    for frame in frames:
        ctx = getattr(frame, "context_id", None)
        if ctx:
            out.setdefault(ctx, []).append(frame)
    return out


def seconds(frames: Sequence[Frame]) -> float:
    return sum(len(f.audio) / 2 / f.sample_rate for f in frames if isinstance(f, TTSAudioRawFrame))


def cancelled(server: RunningServer) -> float:
    """Messages the server answered ``cancelled`` (its own count, from /metrics)."""
    try:
        return metric(server, 'streamvoice_errors_total{code="cancelled"}')
    except KeyError:
        return 0.0


def spoken_words(frames: Sequence[Frame]) -> list[str]:
    return [f.text.strip() for f in frames if isinstance(f, TTSTextFrame)]


@pytest.mark.slow
async def test_speak_frame_gives_audio_and_word_timestamps(speech_server: RunningServer) -> None:
    tts = StreamvoiceTTSService(base_url=speech_server.url, voice="af_heart")
    down, _ = await run_test(tts, frames_to_send=[TTSSpeakFrame(REPLY)], start_timeout=START)
    assert not [f for f in down if isinstance(f, ErrorFrame)]
    (frames,) = by_context(down).values()
    kinds = [type(f) for f in frames]
    assert kinds.index(TTSStartedFrame) < kinds.index(TTSAudioRawFrame) and kinds[-1] is TTSStoppedFrame
    word_times = [f.pts for f in frames if isinstance(f, TTSTextFrame)]
    assert word_times == sorted(word_times) and len(set(word_times)) == len(word_times)
    assert {f.sample_rate for f in frames if isinstance(f, TTSAudioRawFrame)} == {24_000}
    assert 3.0 < seconds(frames) < 9.0
    assert spoken_words(frames) == REPLY.split()  # every word once, in order


@pytest.mark.slow
async def test_llm_turn_is_one_context_at_the_pipeline_rate(speech_server: RunningServer) -> None:
    from pipecat.pipeline.worker import PipelineParams

    tts = StreamvoiceTTSService(base_url=speech_server.url, voice="am_michael", speed=1.1)
    tokens = [LLMTextFrame(w + " ") for w in REPLY.split()]
    down, _ = await run_test(
        tts,
        frames_to_send=[LLMFullResponseStartFrame(), *tokens, LLMFullResponseEndFrame()],
        pipeline_params=PipelineParams(audio_out_sample_rate=16_000),
        start_timeout=START,
    )
    contexts = by_context(down)
    assert len(contexts) == 1
    (frames,) = contexts.values()
    assert {f.sample_rate for f in frames if isinstance(f, TTSAudioRawFrame)} == {16_000}
    assert spoken_words(frames) == REPLY.split()
    assert isinstance(frames[-1], TTSStoppedFrame)


@pytest.mark.slow
async def test_interruption_cancels_only_the_interrupted_context(speech_server: RunningServer) -> None:
    tts = StreamvoiceTTSService(base_url=speech_server.url, voice="af_heart")
    long_reply = " ".join([REPLY] * 5)
    cancelled_before = cancelled(speech_server)
    down, _ = await run_test(
        tts,
        frames_to_send=[
            TTSSpeakFrame(long_reply),
            SleepFrame(sleep=2.0),
            InterruptionFrame(),
            TTSSpeakFrame("Sorry, go ahead."),
        ],
        start_timeout=START,
    )
    first, second = by_context(down).values()
    assert seconds(first) < 15.0  # the long reply would be ~30 s: cut at the barge-in
    assert cancelled(speech_server) > cancelled_before  # the server stopped the interrupted message
    assert spoken_words(second) == ["Sorry,", "go", "ahead."]
    assert isinstance(second[-1], TTSStoppedFrame) and seconds(second) > 0.8


async def test_bad_voice_is_an_error_frame(speech_server: RunningServer) -> None:
    tts = StreamvoiceTTSService(base_url=speech_server.url, voice="af_hart")
    down, up = await run_test(tts, frames_to_send=[TTSSpeakFrame("Hello there.")], start_timeout=START)
    errors = [f for f in [*down, *up] if isinstance(f, ErrorFrame)]
    assert errors and "unknown_voice" in errors[0].error
