"""Where sound is audible in a signal: the one definition the engine trims by and the benchmarks measure by.

Kokoro's silences are digital (about -150 dBFS), and speech starts sharply, so a fixed level is enough: a
5 ms block is audible when its RMS is above -50 dBFS (a breath's onset is around -45, measured on the stock
voices). Moving the threshold 10 dB either way moves onsets by at most 5 ms on the bench sentences.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

AUDIBLE_DBFS = -50.0
BLOCK_MS = 5.0


def block_levels(
    samples: NDArray[np.float32], sample_rate: int, block_ms: float = BLOCK_MS
) -> NDArray[np.float64]:
    """RMS level of each whole block, in dBFS (a partial last block is padded with silence)."""
    block = max(1, round(sample_rate * block_ms / 1000))
    n = -(-len(samples) // block)
    padded = np.zeros(n * block, dtype=np.float64)
    padded[: len(samples)] = samples
    rms = np.sqrt(np.mean(padded.reshape(n, block) ** 2, axis=1))
    return 20 * np.log10(np.maximum(rms, 1e-10))


def audible_span(
    samples: NDArray[np.float32], sample_rate: int, threshold_db: float = AUDIBLE_DBFS
) -> tuple[int, int] | None:
    """Sample range from the first audible block's start to the last one's end; None if all is silent."""
    if len(samples) == 0:
        return None
    block = max(1, round(sample_rate * BLOCK_MS / 1000))
    loud = np.flatnonzero(block_levels(samples, sample_rate) > threshold_db)
    if loud.size == 0:
        return None
    return int(loud[0]) * block, min(len(samples), (int(loud[-1]) + 1) * block)


def leading_silence_ms(samples: NDArray[np.float32], sample_rate: int) -> float | None:
    span = audible_span(samples, sample_rate)
    return None if span is None else span[0] * 1000 / sample_rate


def trailing_silence_ms(samples: NDArray[np.float32], sample_rate: int) -> float | None:
    span = audible_span(samples, sample_rate)
    return None if span is None else (len(samples) - span[1]) * 1000 / sample_rate


def silent_gaps(
    samples: NDArray[np.float32], sample_rate: int, min_ms: float = 100.0
) -> list[tuple[float, float]]:
    """Silences of at least ``min_ms`` between audible sound, as (start ms, end ms): the pauses a listener
    hears inside an answer (leading and trailing silence are not gaps)."""
    block = max(1, round(sample_rate * BLOCK_MS / 1000))
    loud = block_levels(samples, sample_rate) > AUDIBLE_DBFS
    gaps: list[tuple[float, float]] = []
    indices = np.flatnonzero(loud)
    for a, b in itertools.pairwise(indices):
        if b - a - 1 >= 1:
            start, end = (a + 1) * block * 1000 / sample_rate, b * block * 1000 / sample_rate
            if end - start >= min_ms:
                gaps.append((start, end))
    return gaps


def heard_onset(arrivals: Sequence[tuple[float, int]], pcm: bytes, sample_rate: int) -> float | None:
    """When a player that starts playing at the first byte lets the listener hear speech.

    That is the first byte's arrival plus the silence before the first audible sample, or the arrival of
    the first audible sample if it comes later (the player would have run dry first). ``arrivals``: (time,
    bytes) of each 16-bit PCM frame in order; ``pcm``: those frames joined. None if nothing is audible.
    """
    if not arrivals:
        return None
    audio = (np.frombuffer(pcm[: len(pcm) // 2 * 2], dtype="<i2") / np.float32(32767)).astype(np.float32)
    span = audible_span(audio, sample_rate)
    if span is None:
        return None
    byte = span[0] * 2
    seen = 0
    arrival = arrivals[-1][0]
    for at, size in arrivals:
        seen += size
        if seen > byte:
            arrival = at
            break
    return max(arrivals[0][0] + span[0] / sample_rate, arrival)
