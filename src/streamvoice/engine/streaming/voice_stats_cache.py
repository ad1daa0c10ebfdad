"""Every stock voice's decoder statistics on disk, so no caller ever gets a voice's cold first piece.

Calibrating one voice takes a few hundred milliseconds of model work; all 54 take ~30 s on two cores. So it
happens once per model file (``streamvoice models calibrate``, run by the Docker build, or by the first
server start that finds no file), and later starts load the result in well under a second. The file is
keyed by the model's and voices' hashes and by the decoder graph that measured them: statistics of another
export or decoder would be wrong, not just stale.

Looked for beside the model files first (an image ships them there), then in the user cache.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from streamvoice.engine.kokoro import KokoroEngine
from streamvoice.engine.static_int8 import static_decoder
from streamvoice.engine.streaming.speech_estimate import Reference
from streamvoice.engine.surgery.norm_stats import NormStats
from streamvoice.model_files import naming_hash, user_cache_dir

log = logging.getLogger("streamvoice.engine")
FORMAT = 4  # bump when calibration changes: old files then no longer match


def cache_name(engine: KokoroEngine) -> str:
    """Keyed by the model and voices, by the decoder graph (the exported one and each derivation of the
    static one measure other statistics), and by the speech estimate whose summaries it keeps (if any)."""
    key = naming_hash(engine.files.model)[:16] + "-" + naming_hash(engine.files.voices)[:8]
    decoder = {"exported": "", "static-int8": f"-static{static_decoder.FORMAT}"}.get(
        engine.decoder_graph, f"-{engine.decoder_graph}"
    )
    estimator = engine.split.estimator if engine.split is not None else None
    fit = "" if estimator is None else f"-{estimator.digest()}"
    return f"voice-stats-v{FORMAT}-{key}{decoder}{fit}.npz"


def default_dir() -> Path:
    return user_cache_dir()


def candidates(engine: KokoroEngine, extra: Path | None = None) -> list[Path]:
    name = cache_name(engine)
    dirs = [d for d in (extra, engine.files.model.parent, default_dir()) if d is not None]
    return [d / name for d in dirs]


def _pack(stats: NormStats) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    means = np.concatenate([m.reshape(-1) for m in stats.means])
    variances = np.concatenate([v.reshape(-1) for v in stats.variances])
    return means, variances


def _unpack(
    means: NDArray[np.float64],
    variances: NDArray[np.float64],
    shapes: Sequence[tuple[int, ...]],
    frames: float,
) -> NormStats:
    out_m, out_v, at = [], [], 0
    for shape in shapes:
        n = int(np.prod(shape))
        out_m.append(means[at : at + n].reshape(shape))
        out_v.append(variances[at : at + n].reshape(shape))
        at += n
    return NormStats(tuple(out_m), tuple(out_v), frames)


def save(engine: KokoroEngine, path: Path) -> Path:
    known = engine.memory.known()
    arrays: dict[str, NDArray[np.float64]] = {}
    shapes: list[tuple[int, ...]] | None = None
    for name, (speech, silence) in known.items():
        reference = engine.memory.stock_reference(name)
        shapes = shapes or [m.shape for m in speech.means]
        parts = {"speech": speech, "silence": silence, "reference": reference.stats if reference else None}
        for part, stats in parts.items():
            if stats is not None:
                arrays[f"{name}.{part}.mean"], arrays[f"{name}.{part}.var"] = _pack(stats)
                arrays[f"{name}.{part}.frames"] = np.array([stats.frames])
        if reference is not None:
            arrays[f"{name}.summaries"] = reference.summaries
    if shapes is None:
        raise ValueError("no voice statistics to save; calibrate first")
    arrays["shapes"] = np.array([s[1] for s in shapes], dtype=np.int64)  # [1, C, 1] each
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(fd)
    with open(tmp, "wb") as fh:  # a file object: np.savez would add ".npz" to a bare name
        np.savez(fh, **arrays)  # type: ignore[arg-type]
    os.replace(tmp, path)  # readers never see half a file
    return path


def load(engine: KokoroEngine, path: Path) -> int:
    """Set every voice the file holds; how many."""
    with np.load(path) as data:
        shapes = [(1, int(c), 1) for c in data["shapes"]]

        def stats(key: str) -> NormStats | None:
            if f"{key}.mean" not in data.files:
                return None
            return _unpack(data[f"{key}.mean"], data[f"{key}.var"], shapes, float(data[f"{key}.frames"][0]))

        names = {key.split(".")[0] for key in data.files if key.endswith(".speech.mean")}
        for name in sorted(names & engine.voice_names):
            engine.set_voice_stats(name, stats(f"{name}.speech"), stats(f"{name}.silence"))
            whole = stats(f"{name}.reference")
            if whole is not None and f"{name}.summaries" in data.files:
                summaries = np.asarray(data[f"{name}.summaries"], dtype=np.float64)
                engine.set_voice_reference(name, Reference(whole, summaries))
        return len(names & engine.voice_names)


def calibrate_all(engine: KokoroEngine, out: Path | None = None) -> Path | None:
    """Calibrate every stock voice and save the file (to ``out``, else the user cache). None if this
    export has no streaming decoder (nothing to calibrate)."""
    started = time.perf_counter()
    for name in sorted(engine.voice_names):
        if engine.calibrate(name) is None:
            return None
    path = save(engine, (out or default_dir()) / cache_name(engine))
    log.info(
        "calibrated %d voices in %.1f s; saved %s",
        len(engine.voice_names),
        time.perf_counter() - started,
        path,
    )
    return path


def prepare(engine: KokoroEngine, directory: Path | None = None) -> str:
    """Load every stock voice's statistics, calibrating (once, then cached) if no file has them.

    Returns where they came from, for the start-up log.
    """
    if not engine.streams_in_piece:
        return "not needed (whole-piece synthesis)"
    for path in candidates(engine, directory):
        if path.is_file():
            try:
                count = load(engine, path)
            except (OSError, KeyError, ValueError) as exc:
                log.warning("ignoring unreadable voice statistics %s (%s)", path, exc)
                continue
            if count == len(engine.voice_names):
                return f"loaded {path}"
    log.info(
        "no voice statistics for this model yet: calibrating all %d voices once", len(engine.voice_names)
    )
    try:
        saved = calibrate_all(engine, directory)
    except OSError as exc:  # a read-only cache: the statistics are in memory for this process anyway
        log.warning("could not save voice statistics (%s); they will be calibrated again next start", exc)
        return "calibrated (not saved)"
    return f"calibrated, saved {saved}" if saved else "not available for this export"
