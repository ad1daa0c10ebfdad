"""Which provider the engine really runs on (``engine.options``). ONNX Runtime lists CUDA whenever the GPU
build is installed, yet a session whose CUDA libraries fail to load (onnxruntime-gpu built for CUDA 13 on a
CUDA 12 machine) runs on the CPU with only a log line. Here the CPU build plays that machine: it is told
CUDA is available, and its sessions start on the CPU, which is exactly what such a machine does."""

from __future__ import annotations

import logging
from pathlib import Path

import onnxruntime as ort
import pytest

from streamvoice.engine import KokoroEngine
from streamvoice.engine import options as engine_options
from streamvoice.engine.options import EngineError, EngineOptions
from streamvoice.model_files import resolve_model_files

CUDA = ("CUDAExecutionProvider", "CPUExecutionProvider")


@pytest.fixture
def cuda_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ort, "get_available_providers", lambda: list(CUDA))


@pytest.mark.filterwarnings("ignore:Specified provider 'CUDAExecutionProvider'")
def test_cuda_chosen_by_default_that_does_not_start_is_said_and_the_engine_runs_on_the_cpu(
    cuda_listed: None, kokoro_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="streamvoice.engine"):
        engine = KokoroEngine(resolve_model_files(kokoro_dir, "int8"), EngineOptions(decoder="exported"))
    assert engine.providers == ["CPUExecutionProvider"]
    assert any("CUDA provider did not start" in r.getMessage() for r in caplog.records)
    assert engine.split is not None and engine.split.decoder.get_providers() == ["CPUExecutionProvider"]


@pytest.mark.filterwarnings("ignore:Specified provider 'CUDAExecutionProvider'")
def test_cuda_asked_for_that_does_not_start_is_an_error_saying_what_to_install(
    cuda_listed: None, kokoro_dir: Path
) -> None:
    with pytest.raises(EngineError, match="install the onnxruntime-gpu build for this machine's CUDA"):
        KokoroEngine(resolve_model_files(kokoro_dir, "int8"), EngineOptions(providers=CUDA))


def test_sessions_on_the_providers_asked_for_are_started() -> None:
    class Session:
        def __init__(self, providers: list[str]) -> None:
            self.providers = providers

        def get_providers(self) -> list[str]:
            return self.providers

    on_cuda, on_cpu = Session(list(CUDA)), Session(["CPUExecutionProvider"])
    assert engine_options.cuda_started([on_cuda, on_cuda], CUDA)  # type: ignore[list-item]
    assert not engine_options.cuda_started([on_cuda, on_cpu], CUDA)  # type: ignore[list-item]
    assert engine_options.cuda_started([on_cpu], ["CPUExecutionProvider"])  # type: ignore[list-item]
