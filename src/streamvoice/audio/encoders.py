"""Incremental audio encoders: float32 samples in, container bytes out, piece by piece.

Each encoder returns whatever bytes are ready after every ``encode`` call, so the first piece of a long
message leaves the server before the rest is synthesised. Transport-agnostic: the server and the
benchmarks both use these.
"""

from __future__ import annotations

import io
import struct
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from streamvoice.protocol import SAMPLE_RATE

MEDIA_TYPES = {
    "pcm": f"audio/L16;rate={SAMPLE_RATE};channels=1",
    "wav": "audio/wav",
    "mp3": "audio/mpeg",
    "opus": "audio/ogg;codecs=opus",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "ulaw": "audio/PCMU;rate=8000",
    "alaw": "audio/PCMA;rate=8000",
}


RAW_SAMPLE_BYTES = {"pcm": 2, "f32": 4, "ulaw": 1, "alaw": 1}  # headerless formats: bytes per sample


def raw_duration_ms(fmt: str, sample_rate: int, data_bytes: int) -> float:
    """How long ``data_bytes`` of a headerless format play: what a chunk's ``step_time`` says."""
    return data_bytes / RAW_SAMPLE_BYTES[fmt] * 1000 / sample_rate


def media_type(fmt: str, sample_rate: int = SAMPLE_RATE) -> str:
    """The Content-Type of a stream; raw formats carry their rate in it, containers in their headers."""
    if fmt == "pcm":
        return f"audio/L16;rate={sample_rate};channels=1"
    if fmt in ("ulaw", "alaw"):
        return f"audio/{'PCMU' if fmt == 'ulaw' else 'PCMA'};rate={sample_rate}"
    return MEDIA_TYPES[fmt]


class Encoder(Protocol):
    media_type: str

    def encode(self, samples: NDArray[np.float32]) -> bytes: ...

    def flush(self) -> bytes: ...


def to_pcm16(samples: NDArray[np.float32]) -> NDArray[np.int16]:
    clipped = np.clip(samples, -1.0, 1.0)
    return (clipped * 32767.0).astype("<i2")


class PcmEncoder:
    def __init__(self, sample_rate: int = SAMPLE_RATE) -> None:
        self.media_type = media_type("pcm", sample_rate)

    def encode(self, samples: NDArray[np.float32]) -> bytes:
        return to_pcm16(samples).tobytes()

    def flush(self) -> bytes:
        return b""


class PcmF32Encoder:
    """32-bit float little-endian PCM (Cartesia's ``pcm_f32le``): the samples as the model made them."""

    def __init__(self, sample_rate: int = SAMPLE_RATE) -> None:
        self.media_type = f"audio/x-f32le;rate={sample_rate};channels=1"

    def encode(self, samples: NDArray[np.float32]) -> bytes:
        return np.clip(samples, -1.0, 1.0).astype("<f4").tobytes()

    def flush(self) -> bytes:
        return b""


def wav_header(sample_rate: int = SAMPLE_RATE, data_bytes: int = 0xFFFFFFFF - 36) -> bytes:
    """A 16-bit mono header; the default sizes mark an unknown (streamed) length, as players accept."""
    riff_size = min(data_bytes + 36, 0xFFFFFFFF)
    return (
        b"RIFF"
        + struct.pack("<I", riff_size)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, sample_rate * 2, 2, 16)
        + b"data"
        + struct.pack("<I", min(data_bytes, 0xFFFFFFFF))
    )


class WavEncoder:
    media_type = MEDIA_TYPES["wav"]

    def __init__(self, sample_rate: int = SAMPLE_RATE) -> None:
        self._header: bytes | None = wav_header(sample_rate)

    def encode(self, samples: NDArray[np.float32]) -> bytes:
        head, self._header = self._header or b"", None
        return head + to_pcm16(samples).tobytes()

    def flush(self) -> bytes:
        head, self._header = self._header or b"", None
        return head


class Mp3Encoder:
    media_type = MEDIA_TYPES["mp3"]

    def __init__(self, sample_rate: int = SAMPLE_RATE, bitrate_kbps: int = 48) -> None:
        import lameenc

        self._enc = lameenc.Encoder()
        self._enc.set_bit_rate(bitrate_kbps)
        self._enc.set_in_sample_rate(sample_rate)
        self._enc.set_channels(1)
        self._enc.set_quality(2)

    def encode(self, samples: NDArray[np.float32]) -> bytes:
        return bytes(self._enc.encode(to_pcm16(samples).tobytes()))

    def flush(self) -> bytes:
        return bytes(self._enc.flush())


class _PyAvEncoder:
    """Shared plumbing for encoders that go through FFmpeg (Opus in Ogg, AAC in ADTS, FLAC)."""

    media_type = ""

    def __init__(
        self, fmt: str, codec: str, bitrate: int | None, sample_rate: int, options: dict[str, str]
    ) -> None:
        import av

        self._av = av
        self._buf = io.BytesIO()
        self._sent = 0
        self._container = av.open(self._buf, "w", format=fmt, options=options)
        stream: Any = self._container.add_stream(codec, rate=sample_rate, layout="mono")
        if bitrate:
            stream.bit_rate = bitrate
        self._stream = stream
        self._sample_rate = sample_rate
        self._pts = 0
        self._closed = False

    def _take(self) -> bytes:
        data = self._buf.getvalue()
        new, self._sent = data[self._sent :], len(data)
        return new

    def encode(self, samples: NDArray[np.float32]) -> bytes:
        pcm = to_pcm16(samples).reshape(1, -1)
        frame = self._av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
        frame.sample_rate = self._sample_rate
        frame.pts = self._pts
        self._pts += pcm.shape[1]
        for packet in self._stream.encode(frame):
            self._container.mux(packet)
        return self._take()

    def flush(self) -> bytes:
        if self._closed:
            return b""
        self._closed = True
        for packet in self._stream.encode(None):
            self._container.mux(packet)
        self._container.close()
        return self._take()


class OpusEncoder(_PyAvEncoder):
    media_type = MEDIA_TYPES["opus"]

    def __init__(self, sample_rate: int = SAMPLE_RATE, bitrate: int = 32_000) -> None:
        # 20 ms Ogg pages: without this the muxer holds about a second of audio before writing a byte.
        super().__init__("ogg", "libopus", bitrate, sample_rate, {"page_duration": "20000"})


class AacEncoder(_PyAvEncoder):
    """AAC-LC in ADTS frames: self-delimiting, so a player starts on the first frame (what OpenAI's
    ``aac`` is); an MP4 container would need its index first."""

    media_type = MEDIA_TYPES["aac"]

    def __init__(self, sample_rate: int = SAMPLE_RATE, bitrate: int = 32_000) -> None:
        super().__init__("adts", "aac", bitrate, sample_rate, {})


class FlacEncoder(_PyAvEncoder):
    """Lossless, in 4608-sample frames (~0.2 s at 24 kHz): the stream info header leaves with the first."""

    media_type = MEDIA_TYPES["flac"]

    def __init__(self, sample_rate: int = SAMPLE_RATE) -> None:
        super().__init__("flac", "flac", None, sample_rate, {})


class G711Encoder:
    """G.711 (mu-law or A-law), one byte a sample, headerless: what telephone networks carry."""

    def __init__(self, law: str, sample_rate: int = 8_000) -> None:
        import av

        self.media_type = media_type(law, sample_rate)
        self._av = av
        self._rate = sample_rate
        codec: Any = av.CodecContext.create("pcm_mulaw" if law == "ulaw" else "pcm_alaw", "w")
        codec.sample_rate = sample_rate
        codec.layout = "mono"
        codec.format = "s16"
        self._codec = codec

    def encode(self, samples: NDArray[np.float32]) -> bytes:
        if samples.size == 0:
            return b""
        frame = self._av.AudioFrame.from_ndarray(
            to_pcm16(samples).reshape(1, -1), format="s16", layout="mono"
        )
        frame.sample_rate = self._rate
        return b"".join(bytes(packet) for packet in self._codec.encode(frame))

    def flush(self) -> bytes:
        return b""


def make_encoder(fmt: str, sample_rate: int = SAMPLE_RATE, bitrate_kbps: int | None = None) -> Encoder:
    """The encoder for a format; ``bitrate_kbps`` for the compressed ones (None: each one's default)."""
    match fmt:
        case "pcm":
            return PcmEncoder(sample_rate)
        case "f32":
            return PcmF32Encoder(sample_rate)
        case "ulaw" | "alaw":
            return G711Encoder(fmt, sample_rate)
        case "wav":
            return WavEncoder(sample_rate)
        case "mp3":
            return Mp3Encoder(sample_rate, bitrate_kbps or 48)
        case "opus":
            return OpusEncoder(sample_rate, (bitrate_kbps or 32) * 1000)
        case "aac":
            return AacEncoder(sample_rate, (bitrate_kbps or 32) * 1000)
        case "flac":
            return FlacEncoder(sample_rate)
    raise ValueError(f"unsupported audio format {fmt!r}")
