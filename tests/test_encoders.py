"""Every output format decodes back (with FFmpeg via PyAV) to the audio that went in."""

from __future__ import annotations

import io

import av
import numpy as np
import pytest

from streamvoice.audio.encoders import make_encoder, wav_header

SR = 24_000


def tone(seconds: float) -> np.ndarray:
    t = np.arange(int(SR * seconds)) / SR
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def decoded_seconds(data: bytes, fmt: str) -> float:
    if fmt == "pcm":
        return len(data) / 2 / SR
    with av.open(io.BytesIO(data), format={"opus": "ogg", "aac": "aac"}.get(fmt, fmt)) as container:
        samples = 0
        rate = SR
        for frame in container.decode(audio=0):
            samples += frame.samples
            rate = frame.sample_rate
    return samples / rate


@pytest.mark.parametrize("fmt", ["pcm", "wav", "mp3", "opus", "aac", "flac"])
def test_incremental_encoding_round_trips(fmt: str) -> None:
    enc = make_encoder(fmt)
    pieces = [tone(0.7), tone(1.1), tone(0.4)]
    chunks = [enc.encode(p) for p in pieces]
    chunks.append(enc.flush())
    data = b"".join(chunks)
    if fmt in ("pcm", "wav", "mp3", "opus"):
        assert chunks[0], "the first piece must produce bytes before the later ones exist"
    if fmt == "wav":
        data = wav_header(data_bytes=len(data) - 44) + data[44:]
    assert decoded_seconds(data, fmt) == pytest.approx(2.2, abs=0.12)


def test_pcm_is_s16le_and_clips() -> None:
    data = make_encoder("pcm").encode(np.array([0.0, 1.0, -1.0, 2.0], np.float32))
    assert np.frombuffer(data, "<i2").tolist() == [0, 32767, -32767, 32767]
