"""The audibility definition the engine trims by and the benchmarks measure by."""

from __future__ import annotations

import numpy as np

from streamvoice.audio.levels import audible_span, leading_silence_ms, silent_gaps, trailing_silence_ms


def tone(ms: float, rate: int = 24_000, level: float = 0.1) -> np.ndarray:
    t = np.arange(int(rate * ms / 1000)) / rate
    return (level * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


def silence(ms: float, rate: int = 24_000) -> np.ndarray:
    return np.zeros(int(rate * ms / 1000), dtype=np.float32)


def test_silences_are_measured_to_the_block() -> None:
    audio = np.concatenate([silence(100), tone(200), silence(300), tone(100), silence(50)])
    assert abs(leading_silence_ms(audio, 24_000) - 100) <= 5  # type: ignore[operator]
    assert abs(trailing_silence_ms(audio, 24_000) - 50) <= 5  # type: ignore[operator]
    [(start, end)] = silent_gaps(audio, 24_000)
    assert abs(start - 300) <= 5 and abs(end - 600) <= 5


def test_quiet_is_not_audible() -> None:
    assert audible_span(tone(100, level=1e-4), 24_000) is None  # -83 dBFS
    assert audible_span(silence(10), 24_000) is None
    assert leading_silence_ms(np.zeros(0, dtype=np.float32), 24_000) is None
