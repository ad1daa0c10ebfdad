"""Spectral comparison of two renditions of the same audio (windowed vs whole-piece decoding).

Log-spectral distance over frames with speech energy: near-silent frames are left out, because their log
spectra are noise and would dominate the mean.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def log_spec(x: NDArray[np.float32], n: int = 1024, hop: int = 240) -> NDArray[np.float64]:
    frames = np.lib.stride_tricks.sliding_window_view(x, n)[::hop] * np.hanning(n)
    return np.log10(np.abs(np.fft.rfft(frames, axis=1)) ** 2 + 1e-9)


def log_spectral_distance(a: NDArray[np.float32], b: NDArray[np.float32]) -> float:
    """Mean over frames with speech energy of the RMS difference of log power spectra, in dB."""
    sa, sb = log_spec(a), log_spec(b)
    m = min(len(sa), len(sb))
    sa, sb = sa[:m], sb[:m]
    loud = sa.max(axis=1) > sa.max() - 6  # ignore near-silent frames, where log spectra are noise
    return float(np.mean(np.sqrt(np.mean((10 * (sa[loud] - sb[loud])) ** 2, axis=1))))
