"""A message's audio on its way out: the model's 24 kHz samples resampled to the rate the client asked for,
then encoded, chunk by chunk.

Resampling is soxr's streaming resampler (one per message, so chunk edges leave no seams); it holds back a
few milliseconds of filter delay, which ``flush`` releases at the end of the message.
"""

from __future__ import annotations

import numpy as np
import soxr
from numpy.typing import NDArray

from streamvoice.audio.encoders import Encoder, make_encoder
from streamvoice.protocol import SAMPLE_RATE


class Resampler:
    def __init__(self, in_rate: int, out_rate: int) -> None:
        self.in_rate, self.out_rate = in_rate, out_rate
        self._stream = (
            None
            if in_rate == out_rate
            else soxr.ResampleStream(in_rate, out_rate, 1, dtype="float32", quality="HQ")
        )

    def process(self, samples: NDArray[np.float32]) -> NDArray[np.float32]:
        if self._stream is None:
            return samples
        return np.asarray(
            self._stream.resample_chunk(samples.astype(np.float32, copy=False)), dtype=np.float32
        )

    def flush(self) -> NDArray[np.float32]:
        if self._stream is None:
            return np.zeros(0, dtype=np.float32)
        return np.asarray(
            self._stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True), dtype=np.float32
        )


class AudioOutput:
    """Resample, then encode: bytes ready to send after every chunk."""

    def __init__(self, fmt: str, sample_rate: int = SAMPLE_RATE, bitrate_kbps: int | None = None) -> None:
        self.format = fmt
        self.sample_rate = sample_rate
        self._resampler = Resampler(SAMPLE_RATE, sample_rate)
        self._encoder: Encoder = make_encoder(fmt, sample_rate, bitrate_kbps)

    @property
    def media_type(self) -> str:
        return self._encoder.media_type

    def encode(self, samples: NDArray[np.float32]) -> bytes:
        return self._encoder.encode(self._resampler.process(samples))

    def flush(self) -> bytes:
        rest = self._resampler.flush()
        return (self._encoder.encode(rest) if rest.size else b"") + self._encoder.flush()
