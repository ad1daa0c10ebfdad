"""A piece's decoder statistics, estimated from what the front made of it before any of it is decoded.

Each decoder window normalises with the whole piece's instance-norm statistics (its silences included, as
the model normalises a whole piece), which no stream knows before it has decoded the piece. The voice's
statistics from another piece are far from this one's (streamed-vs-whole PESQ 1.74 with them alone), and
blending them with each window's own statistics, as the engine did, only partly mends it (2.69): ``python
-m streamvoice.bench.stream_breakdown``, docs/benchmarks.md 7b. But a piece's statistics are time averages
of what each of its frames contributes, and what a frame contributes follows from what the front says
about it: which sound it is (the aligned text features, classed), its pitch and its energy. So the estimate
is the voice's reference piece (the calibration greeting, decoded whole) moved by a linear map of how this
piece's frame summaries (over all its frames, the model's silences among them) differ from the reference's:

    stats(piece) = stats(reference) + offset + (f(piece) - f(reference) - mu) / sd @ weights @ basis

over the means and the log variances of every norm's channels, but the first norm's first channels: they are
the aligned text features themselves (the decoder's input, before any layer), so their statistics are
computed, not estimated (``with_text_statistics``): estimated, they were where the streams that broke
broke, on sentences where every other norm's estimate was close. The map is fitted once per model file by
ridge regression on ~2,000 pieces of all 54 stock voices, and kept at low rank (the ``basis``): ``python -m
streamvoice.bench.fit_speech_estimate``. It targets the whole piece's statistics directly: the speech's and
the silence's, each decoded alone and merged, as it did before, cannot be the whole piece's, because within
the whole piece the silence's frames move every norm the speech passes through (on "Got it, thanks!",
af_bella's speech and silence each exact and merged streamed at PESQ 2.61 against 3.18 with the whole
piece's, docs/benchmarks.md 7). Every window then normalises with this one fixed estimate, blended with a
little of its own statistics: the voice's ``share`` of the estimate, measured by the same fit
(``Reference.share``).
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from streamvoice.engine.surgery.norm_stats import NormStats

SHIPPED = Path(__file__).with_name("estimates")  # one file per model file it was fitted for, by hash
EPS = 1e-5  # added to a variance before its log: some channels of the model's silence are constant
VOICED_HZ = 40.0  # the front's pitch track is a few Hz where nothing is voiced, 100+ where something is
PITCH_BINS = (2.5, 6.5, 12)  # log Hz: ~12 to ~665 Hz, in 12 bins
ENERGY_BINS = (-8.0, 10.0, 12)  # the front's energy track's range over speech

Floats = NDArray[np.float64]
# The estimate's share of each window's statistics (the window's own the rest), for a voice the fit did not
# measure one for (``SpeechEstimator.shares``). The decoder's loudness follows its norms' variances steeply
# (1.5% more standard deviation in every norm makes af_bella 10% quieter), so the estimate alone (1.0) left
# some voices' pieces 1.5-2x louder or 0.75x quieter than whole, and short pieces 1.3x louder; a little of
# each window's own statistics pulls that back, and too much of it (0.75) costs what the estimate gained.
# Over 4 voices x 6 sentences outside the fit, PESQ 2.83 / 2.94 / 2.61 at 1.0 / 0.875 / 0.75: docs/benchmarks.md 7b.
DEFAULT_SHARE = 0.875


def frame_summaries(asr: NDArray[np.floating], f0: NDArray[np.floating], n: NDArray[np.floating],
                    centers: Floats) -> Floats:  # fmt: skip
    """What the estimate reads of a piece's speech: its aligned text features' mean and the share of its
    frames in each class (nearest of ``centers``), its voiced share and pitch, its energy's summaries and
    histograms of both, and its length. ``asr`` is [C, T] (frames), ``f0`` and ``n`` [2T]."""
    text = np.asarray(asr, dtype=np.float64)
    pitch, energy = np.asarray(f0, dtype=np.float64), np.asarray(n, dtype=np.float64)
    frames = text.shape[1]
    voiced = pitch > VOICED_HZ
    log_pitch = np.log(np.maximum(pitch, 1.0))
    shape = [
        voiced.mean(),
        float((log_pitch * voiced).sum() / max(1, int(voiced.sum()))),
        energy.mean(),
        energy.std(),
        float((energy**2).mean() / 50),
        float(np.log(frames)),
    ]
    lo, hi, bins = PITCH_BINS
    pitch_hist = np.histogram(np.clip(log_pitch, lo, hi), bins=bins, range=(lo, hi))[0] / len(pitch)
    lo, hi, bins = ENERGY_BINS
    energy_hist = np.histogram(np.clip(energy, lo, hi), bins=bins, range=(lo, hi))[0] / len(energy)
    # Nearest class by |x|^2 - 2 x.c + |c|^2, without the [T, K, C] array of differences; in float32, the
    # front's own precision (float64 doubled this function's time).
    c32 = centers.astype(np.float32)
    distance = (c32**2).sum(1)[None, :] - 2 * np.asarray(asr, dtype=np.float32).T @ c32.T
    classes = np.bincount(distance.argmin(1), minlength=len(centers)) / frames
    return np.concatenate([text.mean(1), shape, pitch_hist, energy_hist, classes])


def packed(stats: NormStats) -> Floats:
    """The statistics as one vector: every norm's channel means, then their log variances."""
    means = np.concatenate([np.asarray(m, dtype=np.float64).reshape(-1) for m in stats.means])
    variances = np.concatenate([np.asarray(v, dtype=np.float64).reshape(-1) for v in stats.variances])
    return np.concatenate([means, np.log(variances + EPS)])


def unpacked(vector: Floats, sizes: tuple[int, ...], frames: float) -> NormStats:
    half = len(vector) // 2
    means, log_vars, out_m, out_v, at = vector[:half], vector[half:], [], [], 0
    for size in sizes:
        out_m.append(means[at : at + size].reshape(1, size, 1))
        out_v.append(np.maximum(np.exp(log_vars[at : at + size]) - EPS, 1e-8).reshape(1, size, 1))
        at += size
    return NormStats(tuple(out_m), tuple(out_v), frames)


def with_text_statistics(stats: NormStats, asr: NDArray[np.floating]) -> NormStats:
    """``stats`` with the first norm's first channels set to those of ``asr`` [C, T], the aligned text
    features the decoder reads first: its first norm normalises them, with two pitch and energy channels
    after (``tests/test_speech_estimate.py`` checks it against a decode)."""
    text = np.asarray(asr, dtype=np.float64)
    channels = text.shape[0]
    means, variances = stats.means[0].copy(), stats.variances[0].copy()
    means[0, :channels, 0], variances[0, :channels, 0] = text.mean(1), text.var(1)
    return NormStats((means, *stats.means[1:]), (variances, *stats.variances[1:]), stats.frames)


def without_text_channels(targets: Floats, channels: int) -> Floats:
    """Fit targets (packed differences) with the text channels (``with_text_statistics``) zeroed: the fit
    spends none of its rank on what is computed."""
    out = targets.copy()
    half = out.shape[1] // 2
    out[:, :channels] = 0.0
    out[:, half : half + channels] = 0.0
    return out


@dataclass(frozen=True)
class Reference:
    """A voice's reference piece: its whole statistics and its frame summaries (``frame_summaries``), the
    voice's own bias in the estimator's basis (``SpeechEstimator.bias``; zero for a voice not fitted), its
    share of the estimate in every window (``SpeechEstimator.share``) and the gain its stream takes at that
    share (``SpeechEstimator.gain``)."""

    stats: NormStats
    summaries: Floats
    bias: Floats | None = None
    share: float = DEFAULT_SHARE
    gain: float = 1.0

    @functools.cached_property
    def packed(self) -> Floats:
        """``packed(stats)``, made once per reference rather than once per piece."""
        return packed(self.stats)

    @staticmethod
    def mixed(parts: list[tuple[Reference, float]]) -> Reference:
        """A blend's reference: its parts' statistics merged and summaries averaged, by weight; the smallest
        of their shares (a part that needs its windows' own statistics to keep its loudness still does); their
        gains' weighted geometric mean."""
        total = sum(weight for _, weight in parts)
        stats: NormStats | None = None
        for ref, weight in parts:
            stats = NormStats.merge(stats, ref.stats.weighted(weight / total * ref.stats.frames))
        assert stats is not None
        summaries = np.sum([ref.summaries * (weight / total) for ref, weight in parts], axis=0)
        biases = [(ref.bias, weight / total) for ref, weight in parts if ref.bias is not None]
        bias = np.sum([b * w for b, w in biases], axis=0) if biases else None
        gain = float(np.exp(sum(np.log(ref.gain) * weight / total for ref, weight in parts)))
        return Reference(stats, summaries, bias, min(ref.share for ref, _ in parts), gain)


@dataclass(frozen=True)
class SpeechEstimator:
    """The fitted map (see the module's docstring)."""

    centers: Floats  # [K, C] frame classes of the aligned text features
    mu: Floats  # [F] the summaries' differences' mean and spread over the fit's pieces
    sd: Floats
    weights: Floats  # [F, R]
    basis: NDArray[np.float32]  # [R, 2 x channels]: float32, read whole for every piece (~1 ms)
    offset: Floats  # [2 x channels]
    sizes: tuple[int, ...]  # channels of each norm, in graph order
    # Each fitted voice's mean residual over its pieces, in the basis [R]: how its pieces differ from its
    # greeting beyond what the shared map says (without it one voice's pieces came out 1.5x too loud).
    voices: dict[str, Floats] = field(default_factory=dict)
    # Each measured voice's share of the estimate in every window: the one, of those the fit tried, whose
    # windows sounded most like whole pieces while staying as loud (``fit_speech_estimate.shares``).
    shares: dict[str, float] = field(default_factory=dict)
    # Each measured voice's stream gain at its share: its whole pieces' loudness over its streams' (geometric
    # mean over the sentences its share was measured on). The decoder's loudness follows the norms' variances
    # steeply, and an estimate off by a few percent in them leaves a voice's every piece louder or quieter by
    # about one factor (af_bella 1.2x at 0.9375): the gain takes that factor out, so the share is chosen for
    # how the windows sound and not to pull the loudness back (``fit_speech_estimate.chosen_share``).
    gains: dict[str, float] = field(default_factory=dict)

    def bias(self, voice: str) -> Floats | None:
        return self.voices.get(voice)

    def share(self, voice: str) -> float:
        return self.shares.get(voice, DEFAULT_SHARE)

    def gain(self, voice: str) -> float:
        return self.gains.get(voice, 1.0)

    def summaries(
        self, asr: NDArray[np.floating], f0: NDArray[np.floating], n: NDArray[np.floating]
    ) -> Floats:
        return frame_summaries(asr, f0, n, self.centers)

    def estimate(self, reference: Reference, summaries: Floats, frames: float) -> NormStats:
        """The piece's statistics (counted as ``frames``), from its summaries and the voice's reference."""
        x = (summaries - reference.summaries - self.mu) / self.sd
        coefficients = x @ self.weights + (reference.bias if reference.bias is not None else 0.0)
        moved = reference.packed + self.offset + coefficients.astype(np.float32) @ self.basis
        return unpacked(moved, self.sizes, frames)

    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:  # a file object: np.savez would add ".npz" to a bare name
            np.savez_compressed(
                fh, centers=self.centers.astype(np.float32), mu=self.mu, sd=self.sd,
                weights=self.weights.astype(np.float32), basis=self.basis.astype(np.float16),
                offset=self.offset.astype(np.float32), sizes=np.array(self.sizes, dtype=np.int64),
                voice_names=np.array(sorted(self.voices)),
                voice_bias=np.array([self.voices[v] for v in sorted(self.voices)], dtype=np.float32).reshape(-1, len(self.basis)),
                share_names=np.array(sorted(self.shares)),
                share_values=np.array([self.shares[v] for v in sorted(self.shares)], dtype=np.float64),
                gain_names=np.array(sorted(self.gains)),
                gain_values=np.array([self.gains[v] for v in sorted(self.gains)], dtype=np.float64),
            )  # fmt: skip
        return path

    @staticmethod
    def load(path: Path) -> SpeechEstimator:
        with np.load(path) as data:
            return SpeechEstimator(
                centers=data["centers"].astype(np.float64), mu=data["mu"], sd=data["sd"],
                weights=data["weights"].astype(np.float64), basis=data["basis"].astype(np.float32),
                offset=data["offset"].astype(np.float64), sizes=tuple(int(s) for s in data["sizes"]),
                voices={str(v): b.astype(np.float64) for v, b in zip(data["voice_names"], data["voice_bias"], strict=True)}
                if "voice_names" in data.files else {},
                shares={str(v): float(w) for v, w in zip(data["share_names"], data["share_values"], strict=True)}
                if "share_names" in data.files else {},
                gains={str(v): float(g) for v, g in zip(data["gain_names"], data["gain_values"], strict=True)}
                if "gain_names" in data.files else {},
            )  # fmt: skip

    def digest(self) -> str:
        """Names the fit, so cached reference summaries (``voice_stats_cache``) follow it."""
        h = hashlib.sha256()
        for part in (self.centers, self.mu, self.sd, self.weights):
            h.update(np.ascontiguousarray(part).tobytes())
        return h.hexdigest()[:8]


def estimate_name(model_hash: str) -> str:
    return f"speech-estimate-{model_hash[:16]}.npz"


def shipped(model_hash: str, folder: Path = SHIPPED) -> SpeechEstimator | None:
    """The estimator fitted for this model file (None: none was, and windows blend as before)."""
    path = folder / estimate_name(model_hash)
    return SpeechEstimator.load(path) if path.is_file() else None


def kmeans(points: Floats, k: int, rounds: int = 20, seed: int = 0) -> Floats:
    """``k`` frame classes of ``points`` [N, C] (Lloyd's algorithm from a seeded random draw)."""
    rng = np.random.default_rng(seed)
    centers = points[rng.choice(len(points), k, replace=False)].copy()
    for _ in range(rounds):
        labels = ((centers**2).sum(1)[None, :] - 2 * points @ centers.T).argmin(1)
        for j in range(k):
            if (labels == j).any():
                centers[j] = points[labels == j].mean(0)
    return centers


def fit(
    summaries: Floats,
    targets: Floats,
    centers: Floats,
    sizes: tuple[int, ...],
    ridge: float,
    rank: int,
    voices: list[str] | None = None,
) -> SpeechEstimator:
    """The estimator from pieces' summary differences [N, F] and statistics differences [N, 2 x channels]
    (each piece's against its voice's reference), by ridge regression, its fitted outputs kept to their
    top ``rank`` directions; with each piece's voice (``voices``), each voice's bias (``bias``)."""
    mu, sd = summaries.mean(0), summaries.std(0) + 1e-6
    x = (summaries - mu) / sd
    offset = targets.mean(0)
    y = targets - offset
    full = np.linalg.solve(x.T @ x + ridge * np.eye(x.shape[1]), x.T @ y)  # [F, 2 x channels]
    _, _, vt = np.linalg.svd(x @ full, full_matrices=False)
    basis = vt[:rank]
    weights = full @ basis.T
    residual = (y - x @ weights @ basis) @ basis.T  # [N, R]: what the map leaves, in its basis
    names = voices or []
    bias = {v: residual[[i for i, n in enumerate(names) if n == v]].mean(0) for v in set(names)}
    return SpeechEstimator(centers, mu, sd, weights, basis.astype(np.float32), offset, sizes, bias)
