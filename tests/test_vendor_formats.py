"""Every audio format the vendors' SDKs name is one a client may send, so each is served: the values are read
from the installed SDKs' own type files, so a newer SDK's new value fails here instead of for a user.
ElevenLabs' ``pcm_32000``, ``wav_*`` and ``opus_48000_*`` and Deepgram's ``sample_rate=32000`` were refused."""

from __future__ import annotations

import io
import typing
import wave
from typing import Any

import av
import numpy as np
import pytest
from elevenlabs import ElevenLabs

from streamvoice.audio.encoders import make_encoder
from streamvoice.bench.wer import word_error_rate
from streamvoice.protocol import SAMPLE_RATE, check_rate_for_format
from streamvoice.server.surfaces.deepgram.request import sample_rate
from streamvoice.server.surfaces.elevenlabs.request import output_format
from tests.helpers import TRAIN_SENTENCE as TEXT
from tests.helpers import VENDOR_TOKEN as TOKEN
from tests.helpers import RunningServer, pcm16
from tests.test_deepgram import deepgram_client


def _literals(alias: Any) -> set[str]:
    """The values a Fern-made ``Union[Literal[...], Any]`` names."""
    return {
        v
        for arg in typing.get_args(alias)
        if typing.get_origin(arg) is typing.Literal
        for v in typing.get_args(arg)
    }


def _elevenlabs_formats() -> set[str]:
    from elevenlabs.text_to_speech import types
    from elevenlabs.types.output_format import OutputFormat
    from elevenlabs.types.tts_output_format import TtsOutputFormat

    named = [getattr(types, n) for n in dir(types) if n.endswith("OutputFormat")]
    return set().union(*(_literals(a) for a in [*named, OutputFormat, TtsOutputFormat]))


def test_every_elevenlabs_output_format_the_sdk_names_is_served() -> None:
    formats = _elevenlabs_formats()
    assert {"pcm_32000", "wav_48000", "opus_48000_192", "mp3_44100_128", "alaw_8000"} <= formats
    tone = np.sin(np.arange(SAMPLE_RATE // 5) * 2 * np.pi * 220 / SAMPLE_RATE).astype(np.float32)
    for name in sorted(formats):
        asked = output_format(name)  # raises for a value a client may send and we refuse
        kind, rate = name.split("_")[:2]
        assert (asked.format, asked.rate) == (kind, int(rate)), name
        check_rate_for_format(asked.format, asked.rate)
        encoder = make_encoder(asked.format, asked.rate, asked.bitrate_kbps)  # it encodes what it names
        assert encoder.encode(tone) + encoder.flush(), name


def test_every_deepgram_sample_rate_the_sdk_names_is_served() -> None:
    from deepgram.types.speak_v1sample_rate import SpeakV1SampleRate
    from deepgram.types.speak_v2sample_rate import SpeakV2SampleRate

    rates = _literals(SpeakV1SampleRate) | _literals(SpeakV2SampleRate)
    assert "32000" in rates
    for rate in sorted(rates):
        assert sample_rate({"sample_rate": rate}, 24_000) == int(rate)


def _wav(data: bytes) -> tuple[int, np.ndarray]:
    with wave.open(io.BytesIO(data)) as w:
        return w.getframerate(), pcm16(w.readframes(w.getnframes()))


def _ogg_opus(data: bytes) -> tuple[int, np.ndarray]:
    with av.open(io.BytesIO(data)) as container:
        frames = [f.to_ndarray().reshape(-1) for f in container.decode(audio=0)]
        rate = container.streams.audio[0].rate
    return rate, np.concatenate(frames).astype(np.float32)


@pytest.mark.slow
def test_the_new_formats_are_heard_through_the_vendors_sdks(
    vendor_server: RunningServer, transcriber
) -> None:  # type: ignore[no-untyped-def]
    client = ElevenLabs(base_url=vendor_server.url, api_key=TOKEN)

    def eleven(fmt: str) -> bytes:
        return b"".join(client.text_to_speech.convert("af_heart", text=TEXT, output_format=fmt))

    heard: dict[str, tuple[int, np.ndarray]] = {
        "elevenlabs pcm_32000": (32_000, pcm16(eleven("pcm_32000"))),
        "elevenlabs wav_32000": _wav(eleven("wav_32000")),
        "elevenlabs opus_48000_64": _ogg_opus(eleven("opus_48000_64")),
    }
    deepgram = deepgram_client(vendor_server)
    wav = b"".join(
        deepgram.speak.v1.audio.generate(
            text=TEXT, model="aura-2-thalia-en", encoding="linear16", container="wav", sample_rate="32000"
        )
    )
    heard["deepgram sample_rate=32000"] = _wav(wav)
    for name, (rate, audio) in heard.items():
        expected = 48_000 if "opus" in name else 32_000
        assert rate == expected and audio.size > rate, name  # the rate asked for, and seconds of it
        assert word_error_rate(TEXT, transcriber.transcribe(audio, rate)) < 0.2, name
