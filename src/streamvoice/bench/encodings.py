"""Encodings (the AWS reference sample's experiment, widened): 24 clips through PCM, WAV, MP3 48k, AAC 32k in fragmented
MP4, and Opus 32k in Ogg. Bytes, bytes under base64 (what SSE carries), measured bitrate, encoder delay
(audio fed in before the first byte comes out, in 20 ms frames), and speech-to-text word error rate after
decoding each format back.

Run: ``python -m streamvoice.bench.encodings [--clips 24] [--no-asr]``
"""

from __future__ import annotations

import argparse
import base64
import io
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamvoice.audio.encoders import make_encoder
from streamvoice.bench.common import table, write_result
from streamvoice.bench.tables import md_table, md_value
from streamvoice.engine import KokoroEngine
from streamvoice.protocol import DEFAULT_VOICE, SAMPLE_RATE

SR = SAMPLE_RATE
FORMATS = ["pcm", "wav", "mp3", "aac", "opus"]
LABELS = {"pcm": "PCM s16le", "wav": "WAV", "mp3": "MP3 48k", "aac": "AAC 32k ADTS", "opus": "Opus 32k Ogg"}
REFERENCE_PUBLISHED = {
    "mp3": {"bytes": 308_304, "base64": 411_072, "kbps": 49.5},
    "aac": {"bytes": 258_039, "base64": 344_084, "kbps": 41.6},
}

CLIPS = [
    "Hello, thanks for calling.",
    "Your order is on its way.",
    "It should arrive on Thursday.",
    "Can I help with anything else?",
    "The meeting moved to three o'clock.",
    "Please hold for a moment.",
    "I found two flights that match.",
    "The first one leaves at nine.",
    "The weather looks clear tomorrow.",
    "Your balance is forty two dollars.",
    "I have booked a table for four.",
    "The store closes at eight tonight.",
    "Turn left at the next light.",
    "The package needs a signature.",
    "Your appointment is confirmed.",
    "I could not find that account.",
    "Let me check that for you.",
    "The train is running ten minutes late.",
    "Your password was changed today.",
    "We will send a reminder tomorrow.",
    "That item is back in stock.",
    "The refund takes five business days.",
    "Your room is on the third floor.",
    "Have a great evening.",
]


def encode(fmt: str, audio: NDArray[np.float32]) -> tuple[bytes, float]:
    """Feed 20 ms frames like a live stream; returns (bytes, seconds of audio in before the first byte)."""
    enc = make_encoder(fmt)
    out = bytearray()
    delay: float | None = None
    step = SR // 50
    for i in range(0, audio.size, step):
        out += enc.encode(audio[i : i + step])
        if delay is None and out:
            delay = min(i + step, audio.size) / SR
    out += enc.flush()
    return bytes(out), delay if delay is not None else audio.size / SR


def decode(fmt: str, data: bytes) -> NDArray[np.float32]:
    if fmt == "pcm":
        pcm: NDArray[np.float32] = np.frombuffer(data, "<i2").astype(np.float32) / np.float32(32768)
        return pcm
    import av

    container_format = {"opus": "ogg", "aac": "aac"}.get(fmt, fmt)
    chunks: list[NDArray[np.float32]] = []
    rate = SR
    with av.open(io.BytesIO(data), mode="r", format=container_format) as container:
        for frame in container.decode(audio=0):
            rate = frame.sample_rate
            arr = frame.to_ndarray()
            arr = arr.astype(np.float32) / 32768 if arr.dtype == np.int16 else arr.astype(np.float32)
            mono = arr.mean(axis=0) if arr.ndim > 1 and arr.shape[0] <= 2 else arr.reshape(-1)
            chunks.append(np.asarray(mono, dtype=np.float32))
    audio: NDArray[np.float32] = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
    if rate != SR:
        from streamvoice.bench.asr import resample

        audio = resample(audio, rate, SR)
    return audio


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clips", type=int, default=24)
    parser.add_argument("--no-asr", action="store_true")
    args = parser.parse_args(argv)

    engine = KokoroEngine.load()
    clips = [(text, engine.synthesize(text, DEFAULT_VOICE)) for text in CLIPS[: args.clips]]
    seconds = sum(a.size for _, a in clips) / SR
    transcriber = None
    if not args.no_asr:
        from streamvoice.bench.asr import Transcriber

        transcriber = Transcriber.load()
    rows = []
    for fmt in FORMATS:
        total = b64 = 0
        delays = []
        errors = []
        for text, audio in clips:
            data, delay = encode(fmt, audio)
            total += len(data)
            b64 += len(base64.b64encode(data))
            delays.append(delay)
            if transcriber is not None:
                from streamvoice.bench.wer import word_error_rate

                errors.append(word_error_rate(text, transcriber.transcribe(decode(fmt, data))))
        rows.append(
            {
                "format": LABELS[fmt],
                "bytes": total,
                "base64_bytes": b64,
                "kbps": total * 8 / seconds / 1000,
                "encoder_delay_ms": float(np.mean(delays)) * 1000,
                "wer": float(np.mean(errors)) if errors else None,
                "reference_bytes": REFERENCE_PUBLISHED.get(fmt, {}).get("bytes"),
                "reference_base64": REFERENCE_PUBLISHED.get(fmt, {}).get("base64"),
                "reference_kbps": REFERENCE_PUBLISHED.get(fmt, {}).get("kbps"),
            }
        )
    print(f"{len(clips)} clips, {seconds:.1f} s of speech\n")
    print(
        table(
            rows,
            [
                ("format", "format"),
                ("bytes", "bytes"),
                ("base64_bytes", "base64 bytes"),
                ("kbps", "kbps"),
                ("encoder_delay_ms", "encoder delay ms"),
                ("wer", "WER"),
                ("reference_bytes", "reference bytes"),
                ("reference_base64", "reference base64"),
                ("reference_kbps", "reference kbps"),
            ],
        )
    )
    path = write_result("encodings", {"clips": len(clips), "seconds": seconds, "rows": rows})
    print(f"wrote {path}")
    return {"rows": rows}


def report(d: dict[str, Any]) -> str:
    rows = [
        [
            r["format"],
            md_value(r["bytes"]),
            md_value(r["base64_bytes"]),
            md_value(r["kbps"], 1),
            md_value(r["encoder_delay_ms"]),
            md_value(r["wer"], 3),
            md_value(r["reference_bytes"]),
            md_value(r["reference_base64"]),
            md_value(r["reference_kbps"], 1),
        ]
        for r in d["rows"]
    ]
    return f"{d['clips']} clips, {d['seconds']:.1f} s of speech.\n\n" + md_table(
        [
            "format",
            "bytes",
            "base64 bytes",
            "kbps",
            "encoder delay ms",
            "WER",
            "reference bytes",
            "reference base64",
            "reference kbps",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
