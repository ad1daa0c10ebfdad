"""Model resolution and the real download code, exercised against a local HTTP server."""

from __future__ import annotations

import functools
import hashlib
import http.server
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamvoice.model_files import (
    OFFICIAL_FILES,
    VOICES_FILE,
    DownloadError,
    ModelNotFoundError,
    RemoteFile,
    download_models,
    resolve_model_files,
    sha256_of,
)


@pytest.fixture
def file_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "served"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    class QuietServer(http.server.ThreadingHTTPServer):
        def handle_error(self, request: object, client_address: object) -> None:
            pass  # a client that hangs up early (the size cap) is expected here

    httpd = QuietServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/release/", root
    httpd.shutdown()


def test_missing_model_message_names_both_fixes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KOKORO_MODEL_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(ModelNotFoundError) as info:
        resolve_model_files(tmp_path / "nowhere")
    text = str(info.value)
    assert "streamvoice models download" in text and "KOKORO_MODEL_DIR" in text


def test_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kokoro_dir: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("KOKORO_MODEL_DIR", str(kokoro_dir))
    assert resolve_model_files().model.name == "kokoro-v1.0.int8.onnx"
    explicit = tmp_path / "explicit"
    explicit.mkdir()
    (explicit / VOICES_FILE).symlink_to(kokoro_dir / VOICES_FILE)
    (explicit / "kokoro-v1.0.onnx").write_bytes(b"x")
    assert resolve_model_files(explicit).model == explicit / "kokoro-v1.0.onnx"


def test_download_verifies_and_installs(file_server: tuple[str, Path], tmp_path: Path) -> None:
    base_url, root = file_server
    (root / "release").mkdir()
    model_bytes = b"fake onnx bytes" * 1000
    (root / "release" / "kokoro-v1.0.int8.onnx").write_bytes(model_bytes)
    (root / "release" / VOICES_FILE).write_bytes(b"voices")
    catalogue = {
        "kokoro-v1.0.int8.onnx": RemoteFile(
            "kokoro-v1.0.int8.onnx", hashlib.sha256(model_bytes).hexdigest(), 1
        ),
        VOICES_FILE: RemoteFile(VOICES_FILE, hashlib.sha256(b"voices").hexdigest(), 1),
    }
    seen: list[tuple[str, int, int | None]] = []
    files = download_models(
        tmp_path / "dest", ["int8"], base_url, lambda n, d, t: seen.append((n, d, t)), catalogue
    )
    assert files.model.read_bytes() == model_bytes
    assert seen and seen[-1][1] == seen[-1][2]  # progress reached the total
    assert not list((tmp_path / "dest").glob("*.part"))


def test_download_rejects_wrong_checksum(file_server: tuple[str, Path], tmp_path: Path) -> None:
    base_url, root = file_server
    (root / "release").mkdir()
    (root / "release" / VOICES_FILE).write_bytes(b"tampered")
    (root / "release" / "kokoro-v1.0.int8.onnx").write_bytes(b"tampered")
    with pytest.raises(DownloadError, match="checksum mismatch"):
        download_models(tmp_path / "dest", ["int8"], base_url)
    assert not list((tmp_path / "dest").iterdir())  # nothing half-written survives


def test_download_of_real_voices_matches_official_hash(
    file_server: tuple[str, Path], tmp_path: Path, kokoro_dir: Path
) -> None:
    """The official catalogue's hashes are the real ones: serve the real files and download them."""
    base_url, root = file_server
    (root / "release").mkdir()
    for name in ("kokoro-v1.0.int8.onnx", VOICES_FILE):
        shutil.copy(kokoro_dir / name, root / "release" / name)
    files = download_models(tmp_path / "dest", ["int8"], base_url)
    assert sha256_of(files.voices) == OFFICIAL_FILES[VOICES_FILE].sha256
    assert sha256_of(files.model) == OFFICIAL_FILES["kokoro-v1.0.int8.onnx"].sha256


def test_download_reports_unreachable_host(tmp_path: Path) -> None:
    with pytest.raises(DownloadError, match="failed"):
        download_models(tmp_path / "dest", ["int8"], "http://127.0.0.1:9/")


def test_download_stops_past_the_size_a_file_can_be(file_server: tuple[str, Path], tmp_path: Path) -> None:
    """A server that sends more than the file can be is cut off before the disk fills (the checksum could
    only tell after the whole body arrived)."""
    base_url, root = file_server
    (root / "release").mkdir()
    (root / "release" / "kokoro-v1.0.int8.onnx").write_bytes(b"x" * (3 << 20))  # 3 MiB; the cap is 2 MiB
    (root / "release" / VOICES_FILE).write_bytes(b"voices")
    catalogue = {
        "kokoro-v1.0.int8.onnx": RemoteFile("kokoro-v1.0.int8.onnx", "0" * 64, 1),
        VOICES_FILE: RemoteFile(VOICES_FILE, hashlib.sha256(b"voices").hexdigest(), 1),
    }
    from streamvoice.model_files import download_file

    with pytest.raises(DownloadError, match="more than"):
        download_file(
            base_url.rstrip("/") + "/kokoro-v1.0.int8.onnx",
            tmp_path / "dest" / "kokoro-v1.0.int8.onnx",
            catalogue["kokoro-v1.0.int8.onnx"].sha256,
            max_bytes=2 << 20,
        )
    assert not list((tmp_path / "dest").iterdir())  # nothing half-written survives


# --- 18. model files --------------------------------------------------------------------------------------------


def test_damaged_model_files_are_refused(tmp_path: Any, kokoro_dir: Any) -> None:
    from streamvoice.model_files import ModelFiles, ModelNotFoundError, verify_model_files

    good = ModelFiles(kokoro_dir / "kokoro-v1.0.int8.onnx", kokoro_dir / "voices-v1.0.bin")
    verify_model_files(good)
    bad_voices = tmp_path / "voices-v1.0.bin"
    bad_voices.write_bytes((kokoro_dir / "voices-v1.0.bin").read_bytes()[:1000])
    with pytest.raises(ModelNotFoundError, match="damaged or replaced"):
        verify_model_files(ModelFiles(good.model, bad_voices))
