"""Pipecat's own ElevenLabs, Cartesia and Deepgram TTS services (unmodified, their URL pointed at the real
speech server), driven by Pipecat's ``run_test`` harness: an LLM turn streamed token by token, and a
barge-in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

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
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.services.cartesia.tts import CartesiaTTSService
from pipecat.services.deepgram.tts import DeepgramTTSService
from pipecat.services.elevenlabs.tts import ElevenLabsTTSService
from pipecat.tests.utils import SleepFrame, run_test
from tests.helpers import RunningServer

REPLY = "Your package left the warehouse this morning. It should arrive on Thursday afternoon."
START = 60.0


def ws(server: RunningServer) -> str:
    return server.url.replace("http", "ws", 1)


SERVICES: dict[str, Callable[[RunningServer], Any]] = {
    "elevenlabs": lambda s: ElevenLabsTTSService(
        api_key="key", url=ws(s), settings=ElevenLabsTTSService.Settings(voice="af_heart")
    ),
    "cartesia": lambda s: CartesiaTTSService(
        api_key="key", url=ws(s) + "/tts/websocket", settings=CartesiaTTSService.Settings(voice="af_heart")
    ),
    "deepgram": lambda s: DeepgramTTSService(
        api_key="key", base_url=ws(s), settings=DeepgramTTSService.Settings(voice="af_heart")
    ),
}
TIMED = ("elevenlabs", "cartesia")  # the wires with word or character times


def audio_frames(frames: Sequence[Frame]) -> list[TTSAudioRawFrame]:
    return [f for f in frames if isinstance(f, TTSAudioRawFrame)]


def seconds(frames: Sequence[Frame]) -> float:
    return sum(len(f.audio) / 2 / f.sample_rate for f in audio_frames(frames))


def by_context(frames: Sequence[Frame]) -> dict[str, list[Frame]]:
    out: dict[str, list[Frame]] = {}
    for frame in frames:
        ctx = getattr(frame, "context_id", None)
        if ctx:
            out.setdefault(ctx, []).append(frame)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("vendor", list(SERVICES))
async def test_an_llm_turn_streamed_token_by_token(vendor: str, speech_server: RunningServer) -> None:
    tts = SERVICES[vendor](speech_server)
    tokens = [LLMTextFrame(w + " ") for w in REPLY.split()]
    down, _ = await run_test(
        tts,
        frames_to_send=[
            LLMFullResponseStartFrame(),
            *tokens,
            SleepFrame(sleep=0.5),
            LLMFullResponseEndFrame(),
        ],
        start_timeout=START,
    )
    assert not [f for f in down if isinstance(f, ErrorFrame)], [f for f in down if isinstance(f, ErrorFrame)]
    assert 3.0 < seconds(down) < 9.0
    assert any(isinstance(f, TTSStoppedFrame) for f in down)
    if vendor in TIMED:
        words = [f for f in down if isinstance(f, TTSTextFrame)]
        assert [f.text.strip() for f in words] == REPLY.split()
        pts = [f.pts for f in words]
        assert pts == sorted(pts)
        # the last word starts in the audio's last two seconds, not at its start (times run on)
        assert (pts[-1] - pts[0]) / 1e9 > seconds(down) - 2.5


@pytest.mark.slow
@pytest.mark.parametrize("vendor", list(SERVICES))
async def test_barge_in_cuts_the_answer_and_the_next_is_spoken(
    vendor: str, speech_server: RunningServer
) -> None:
    tts = SERVICES[vendor](speech_server)
    long_reply = " ".join([REPLY] * 5)
    down, _ = await run_test(
        tts,
        frames_to_send=[
            TTSSpeakFrame(long_reply),
            SleepFrame(sleep=2.0),
            InterruptionFrame(),
            TTSSpeakFrame("Sorry, go ahead."),
            SleepFrame(sleep=3.0),
        ],
        start_timeout=START,
    )
    contexts = list(by_context(down).values())
    first, last = contexts[0], contexts[-1]
    assert seconds(first) < 15.0  # the long reply is ~30 s: cut at the barge-in
    assert 0.8 < seconds(last) < 4.0


@pytest.mark.slow
@pytest.mark.parametrize("vendor", ["elevenlabs", "cartesia", "deepgram"])
async def test_the_http_services_speak_a_sentence(vendor: str, speech_server: RunningServer) -> None:
    import aiohttp
    from pipecat.services.cartesia.tts import CartesiaHttpTTSService
    from pipecat.services.deepgram.tts import DeepgramHttpTTSService
    from pipecat.services.elevenlabs.tts import ElevenLabsHttpTTSService

    async with aiohttp.ClientSession() as http:
        url = speech_server.url
        tts = {
            "elevenlabs": lambda: ElevenLabsHttpTTSService(
                api_key="key",
                base_url=url,
                aiohttp_session=http,
                settings=ElevenLabsHttpTTSService.Settings(voice="af_heart"),
            ),
            "cartesia": lambda: CartesiaHttpTTSService(
                api_key="key",
                base_url=url,
                aiohttp_session=http,
                settings=CartesiaHttpTTSService.Settings(voice="af_heart"),
            ),
            "deepgram": lambda: DeepgramHttpTTSService(
                api_key="key",
                base_url=url,
                aiohttp_session=http,
                settings=DeepgramHttpTTSService.Settings(voice="af_heart"),
            ),
        }[vendor]()
        down, _ = await run_test(tts, frames_to_send=[TTSSpeakFrame(REPLY)], start_timeout=START)
    assert not [f for f in down if isinstance(f, ErrorFrame)], [f for f in down if isinstance(f, ErrorFrame)]
    assert 3.0 < seconds(down) < 9.0
    if vendor == "elevenlabs":  # character times from /stream/with-timestamps
        assert [f.text.strip() for f in down if isinstance(f, TTSTextFrame)] == REPLY.split()


@pytest.mark.slow
async def test_elevenlabs_locators_from_pipecat_reach_the_dictionary(speech_server: RunningServer) -> None:
    """Pipecat's ElevenLabs service puts its locators in each context's first message: a dictionary made
    through ElevenLabs' API (as its SDK sends it) changes what is said."""
    import httpx
    from pipecat.services.elevenlabs.tts import PronunciationDictionaryLocator

    rules = [{"type": "alias", "string_to_replace": "UN", "alias": "United Nations Organization"}]
    async with httpx.AsyncClient(base_url=speech_server.url, headers={"xi-api-key": "key"}) as api:
        made = (
            await api.post(
                "/v1/pronunciation-dictionaries/add-from-rules", json={"name": "n", "rules": rules}
            )
        ).json()
    locator = PronunciationDictionaryLocator(
        pronunciation_dictionary_id=made["id"], version_id=made["version_id"]
    )

    async def said(locators: list[Any] | None) -> float:
        tts = ElevenLabsTTSService(  # the argument Pipecat 1.14 still takes (deprecated for text_transforms)
            api_key="key", url=ws(speech_server), settings=ElevenLabsTTSService.Settings(voice="af_heart"),
            pronunciation_dictionary_locators=locators,
        )  # fmt: skip
        down, _ = await run_test(
            tts, frames_to_send=[TTSSpeakFrame("The UN met."), SleepFrame(sleep=3.0)], start_timeout=START
        )
        return seconds(down)

    plain, with_dictionary = await said(None), await said([locator])
    assert with_dictionary > plain + 0.5, (plain, with_dictionary)  # "United Nations Organization" is longer
