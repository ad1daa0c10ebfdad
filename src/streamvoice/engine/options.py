"""How an engine runs: its threads, providers, window plans and decoder graph, as ONNX Runtime is told."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import onnxruntime as ort

from streamvoice.engine.streaming.windows import COLD_PLAN, WindowPlan


class EngineError(RuntimeError):
    pass


# The decoder's graph: as exported (dynamic int8 in the int8 file) or derived as static int8 (CPU only).
DecoderGraph = Literal["exported", "static-int8", "torch"]
# Which runtime runs the model: ONNX Runtime, or PyTorch (engine.torch_kokoro: pieces whole, batched on a
# GPU); auto picks PyTorch where it is installed and sees a CUDA GPU, ONNX Runtime everywhere else.
Runtime = Literal["auto", "onnx", "torch"]


@dataclass(frozen=True)
class EngineOptions:
    intra_op_threads: int = 0  # 0: ONNX Runtime's default (all cores)
    inter_op_threads: int = 1
    spin: bool = False  # let idle ONNX Runtime threads spin (its default); off is faster here
    providers: tuple[str, ...] | None = None
    stream_windows: bool = (
        True  # in-piece streaming: decode each piece in windows (falls back if the graph won't split)
    )
    window_plan: WindowPlan = field(default_factory=WindowPlan)
    cold_window_plan: WindowPlan = COLD_PLAN  # a voice's first piece, before its statistics are known
    english_g2p: str = "misaki"  # or "espeak" (see ``engine.g2p``)
    # None: static int8 for the official int8 file on a CPU (1.6-2x its exported decoder; the quality bar in
    # ``static_decoder``), the graph as exported otherwise.
    decoder: DecoderGraph | None = None
    runtime: Runtime = "auto"

    def session_options(self) -> ort.SessionOptions:
        so = ort.SessionOptions()
        so.intra_op_num_threads = self.intra_op_threads
        so.inter_op_num_threads = self.inter_op_threads
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Idle intra-op threads sleep instead of spinning. The front and the decoder are two sessions with a
        # pool each, run back to back on the first-audio path: a spinning front pool takes CPU from the
        # decoder's (python -m streamvoice.bench.profile: front + first window 169 vs 206 ms on 2 cores).
        so.add_session_config_entry("session.intra_op.allow_spinning", "1" if self.spin else "0")
        return so


# cuDNN picks each convolution's algorithm again for every input shape it has not seen, by default timing
# every algorithm (EXHAUSTIVE). The windowed decoder meets new shapes call after call (window sizes, batch
# rows, piece lengths), so that search would land on listeners' first windows; the heuristic picks without
# timing. ``python -m streamvoice.bench.gpu`` times both, first call and steady state (docs/benchmarks.md 9b).
CUDA_PROVIDER_OPTIONS = {"cudnn_conv_algo_search": "HEURISTIC"}


def session_providers(providers: Sequence[str]) -> list[str | tuple[str, dict[str, str]]]:
    """``providers`` as ONNX Runtime's sessions take them, each with the options this engine runs it with."""
    return [(p, dict(CUDA_PROVIDER_OPTIONS)) if p == "CUDAExecutionProvider" else p for p in providers]


# ONNX Runtime lists the CUDA provider whenever the onnxruntime-gpu build is installed, but a session whose
# CUDA or cuDNN libraries fail to load runs on the CPU with only a log line: 1.27 and later are built for
# CUDA 13, so on a CUDA 12 machine the "GPU" server would quietly decode on its CPU.
CUDA_DID_NOT_START = (
    "ONNX Runtime's CUDA provider did not start (its CUDA or cuDNN libraries did not load; ONNX Runtime's log "
    "above names the missing one): install the onnxruntime-gpu build for this machine's CUDA (1.26.0 is the "
    "newest for CUDA 12; later ones need CUDA 13 and cuDNN 9 for it)"
)


def cuda_started(sessions: Sequence[ort.InferenceSession], providers: Sequence[str]) -> bool:
    """Whether every session runs on CUDA when ``providers`` asked for it (True when they did not)."""
    return "CUDAExecutionProvider" not in providers or all(
        "CUDAExecutionProvider" in s.get_providers() for s in sessions
    )


def choose_providers(requested: tuple[str, ...] | None) -> list[str]:
    available = ort.get_available_providers()
    if requested:
        missing = [p for p in requested if p not in available]
        if missing:
            raise EngineError(
                f"ONNX Runtime providers {missing} are not available here; available: {available}"
            )
        return list(requested)
    preferred = [p for p in ("CUDAExecutionProvider",) if p in available]
    return [*preferred, "CPUExecutionProvider"]
