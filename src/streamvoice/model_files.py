"""Finding the Kokoro model files on disk, and fetching the official release when they are missing.

Resolution order: an explicit directory (``--model-dir``), then ``KOKORO_MODEL_DIR``, then the user cache
that ``streamvoice models download`` fills. Nothing is fetched implicitly: a server that silently pulls
300 MB at start-up is a surprise nobody wants in production.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import tempfile
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

RELEASE_BASE_URL = "https://github.com/thewh1teagle/kokoro-onnx/releases/download/model-files-v1.0/"
VOICES_FILE = "voices-v1.0.bin"
# Preference when a directory holds several exports: int8 is the fastest on CPU (measured here).
MODEL_FILES_BY_PREFERENCE = ("kokoro-v1.0.int8.onnx", "kokoro-v1.0.onnx", "kokoro-v1.0.fp16.onnx")


@dataclass(frozen=True)
class RemoteFile:
    name: str
    sha256: str
    approx_mb: int


OFFICIAL_FILES: dict[str, RemoteFile] = {
    f.name: f
    for f in (
        RemoteFile(
            "kokoro-v1.0.int8.onnx", "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb", 88
        ),
        RemoteFile(
            "kokoro-v1.0.onnx", "7d5df8ecf7d4b1878015a32686053fd0eebe2bc377234608764cc0ef3636a6c5", 310
        ),
        RemoteFile(VOICES_FILE, "bca610b8308e8d99f32e6fe4197e7ec01679264efed0cac9140fe9c29f1fbf7d", 27),
    )
}
# int8-static: the int8 file with its decoder and its front's energy branch derived as static int8
# (``engine.static_decoder``, ``engine.static_front``).
VARIANTS = {
    "int8": "kokoro-v1.0.int8.onnx",
    "fp32": "kokoro-v1.0.onnx",
    "int8-static": "kokoro-v1.0.int8.onnx",
}
STATIC_DECODER_VARIANTS = frozenset({"int8-static"})


class ModelNotFoundError(RuntimeError):
    """Raised with a message that names both ways to fix it."""


class DownloadError(RuntimeError):
    pass


@dataclass(frozen=True)
class ModelFiles:
    model: Path
    voices: Path


def user_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "streamvoice" / "kokoro-v1.0"


def find_in_dir(directory: Path, variant: str | None = None) -> ModelFiles | None:
    voices = directory / VOICES_FILE
    if not voices.is_file():
        return None
    names = [VARIANTS[variant]] if variant else list(MODEL_FILES_BY_PREFERENCE)
    names += sorted(p.name for p in directory.glob("kokoro-v1.0*.onnx") if p.name not in names)
    for name in names:
        candidate = directory / name
        if candidate.is_file() and (variant is None or name == VARIANTS[variant]):
            return ModelFiles(model=candidate, voices=voices)
    return None


def resolve_model_files(model_dir: str | Path | None = None, variant: str | None = None) -> ModelFiles:
    """Find the model, or explain exactly how to get it."""
    tried: list[str] = []
    candidates: list[tuple[str, Path]] = []
    if model_dir:
        candidates.append(("--model-dir", Path(model_dir)))
    env = os.environ.get("KOKORO_MODEL_DIR")
    if env:
        candidates.append(("KOKORO_MODEL_DIR", Path(env)))
    candidates.append(("user cache", user_cache_dir()))
    for label, directory in candidates:
        found = find_in_dir(directory.expanduser(), variant)
        if found:
            return found
        tried.append(f"{label}: {directory}")
    raise ModelNotFoundError(
        "Kokoro model files not found (looked in " + "; ".join(tried) + "). Fix it either way: "
        "run `streamvoice models download` to fetch the official release into the user cache, or point "
        "KOKORO_MODEL_DIR (or --model-dir) at a folder holding kokoro-v1.0*.onnx and voices-v1.0.bin."
    )


def verify_model_files(files: ModelFiles, catalogue: dict[str, RemoteFile] | None = None) -> None:
    """Check files that carry an official release name against the release's hashes (~0.3 s).

    A truncated copy or a swapped file would otherwise load, or fail later in ways that point nowhere near
    the cause. Files under other names (custom exports) are the user's to vouch for.
    """
    for path in (files.model, files.voices):
        remote = (catalogue or OFFICIAL_FILES).get(path.name)
        if remote is not None and sha256_of(path) != remote.sha256:
            raise ModelNotFoundError(
                f"{path} is not the official {path.name} (its sha256 differs): the file is damaged or "
                "replaced. Delete it and run `streamvoice models download`, or point KOKORO_MODEL_DIR at "
                "intact files."
            )


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def naming_hash(path: Path) -> str:
    """``sha256_of`` for naming what is derived from a file (the static graphs, the voice statistics), read
    once per version of the file in a process: a start looks all three up by the 92 MB model's hash.
    Checking a download against its published hash reads the file every time (``sha256_of``)."""
    st = path.stat()
    return _naming_hash(str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _naming_hash(path: str, inode: int, size: int, mtime_ns: int) -> str:
    return sha256_of(Path(path))


ProgressFn = Callable[[str, int, int | None], None]


def text_progress(stream: IO[str] = sys.stderr) -> ProgressFn:
    """A dependency-free progress bar that redraws one line per file."""

    def report(name: str, done: int, total: int | None) -> None:
        if total:
            width = 30
            filled = int(width * done / total)
            bar = "#" * filled + "-" * (width - filled)
            stream.write(f"\r{name} [{bar}] {done / 1e6:7.1f}/{total / 1e6:.1f} MB")
        else:
            stream.write(f"\r{name} {done / 1e6:7.1f} MB")
        if total is not None and done >= total:
            stream.write("\n")
        stream.flush()

    return report


def download_file(
    url: str,
    dest: Path,
    sha256: str,
    progress: ProgressFn | None = None,
    timeout: float = 60.0,
    max_bytes: int | None = None,
) -> Path:
    """Download to a temporary file, verify, then rename: a crash never leaves a half file named right.

    ``max_bytes`` stops a server that sends more than the file can be (declared or not) from filling the
    disk before the checksum could tell.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(prefix=dest.name + ".", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            total_header = resp.headers.get("Content-Length")
            total = int(total_header) if total_header and total_header.isdigit() else None
            if max_bytes is not None and total is not None and total > max_bytes:
                raise DownloadError(
                    f"{dest.name}: the server announces {total} bytes, more than the {max_bytes} this file "
                    "can be; nothing was saved. Check --base-url."
                )
            done = 0
            while block := resp.read(1 << 20):
                if max_bytes is not None and done + len(block) > max_bytes:
                    raise DownloadError(
                        f"{dest.name}: the server sent more than the {max_bytes} bytes this file can be; the "
                        "partial file was discarded. Check --base-url."
                    )
                out.write(block)
                digest.update(block)
                done += len(block)
                if progress:
                    progress(dest.name, done, total)
            if progress and total is None:
                progress(dest.name, done, done)
        actual = digest.hexdigest()
        if actual != sha256:
            raise DownloadError(
                f"{dest.name}: checksum mismatch (expected sha256 {sha256}, got {actual}); the file was "
                "discarded. Retry the download; if it keeps failing, the mirror serves a different file."
            )
        tmp.replace(dest)
        return dest
    except OSError as exc:
        raise DownloadError(f"{dest.name}: download from {url} failed ({exc.__class__.__name__}).") from exc
    finally:
        tmp.unlink(missing_ok=True)


def download_models(
    dest: Path | None = None,
    variants: Iterable[str] = ("int8",),
    base_url: str = RELEASE_BASE_URL,
    progress: ProgressFn | None = None,
    files: dict[str, RemoteFile] | None = None,
) -> ModelFiles:
    """Fetch the chosen exports plus the voices; files already present with the right hash are kept."""
    dest = dest or user_cache_dir()
    catalogue = files or OFFICIAL_FILES
    wanted = [VARIANTS[v] for v in variants] + [VOICES_FILE]
    for name in wanted:
        remote = catalogue[name]
        target = dest / name
        if target.is_file() and sha256_of(target) == remote.sha256:
            continue
        download_file(
            base_url.rstrip("/") + "/" + name,
            target,
            remote.sha256,
            progress,
            max_bytes=(remote.approx_mb + 8) * 1024 * 1024,
        )
    found = find_in_dir(dest, next(iter(variants), None))
    assert found is not None
    return found
