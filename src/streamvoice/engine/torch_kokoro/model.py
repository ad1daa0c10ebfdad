"""Kokoro as one module, and a runner that speaks many pieces in one call.

A call pads every row to a bucket: the front's tokens to a token bucket, the decoder's frames to a frame
bucket. Buckets keep the set of shapes small, so on CUDA each (bucket, batch size) is captured once as a graph
(``graphs``) and every later call replays it. Between the halves the host reads the durations back: the one
synchronisation a call makes, because the frame bucket depends on them.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor, nn

from streamvoice.engine.torch_kokoro import weights
from streamvoice.engine.torch_kokoro.decoder import SAMPLES_PER_FRAME, Decoder
from streamvoice.engine.torch_kokoro.front import Front

TOKEN_BUCKETS = (32, 64, 128, 256, 512)
FRAME_BUCKETS = (48, 96, 192, 384, 768, 1536)


class Kokoro(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.front = Front()
        self.decoder = Decoder()

    @classmethod
    def from_onnx(cls, model: Path | Any, device: str | torch.device = "cpu") -> Kokoro:
        """The official ONNX file's weights (int8 dequantized; or a float graph already made of it by
        ``weights.float_model``), in float32 on ``device``."""
        kokoro = cls()
        weights.load(kokoro, model)
        return kokoro.eval().to(device)


@dataclass(frozen=True)
class Row:
    """One piece: its tokens with the two pads, its voice's style row and its speed."""

    tokens: Sequence[int]
    style: NDArray[np.float32]
    speed: float = 1.0


@dataclass(frozen=True)
class Spoken:
    audio: NDArray[np.float32]
    durations: NDArray[np.int64]


def bucket(n: int, buckets: Sequence[int]) -> int:
    """The smallest bucket that holds n (n itself past the largest)."""
    i = bisect.bisect_left(buckets, n)
    return buckets[i] if i < len(buckets) else n


class Runner:
    """Batches of rows through the model: padded, run, and cut back to each row's own length. Without
    buckets a call is padded to its longest row only (the CPU's way: no graph to reuse, every frame costs)."""

    def __init__(
        self,
        model: Kokoro,
        token_buckets: Sequence[int] = (),
        frame_buckets: Sequence[int] = (),
    ) -> None:
        self.model = model
        self.device = next(model.parameters()).device
        self.token_buckets = tuple(token_buckets)
        self.frame_buckets = tuple(frame_buckets)

    def inputs(self, rows: Sequence[Row]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        width = bucket(max(len(r.tokens) for r in rows), self.token_buckets)
        tokens = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            tokens[i, : len(r.tokens)] = r.tokens
        lengths = np.array([len(r.tokens) for r in rows], dtype=np.int64)
        style = np.stack([np.asarray(r.style, dtype=np.float32).reshape(-1) for r in rows])
        speed = np.array([r.speed for r in rows], dtype=np.float32)
        return tuple(  # type: ignore[return-value]
            torch.from_numpy(a).to(self.device, non_blocking=True) for a in (tokens, lengths, style, speed)
        )

    @torch.inference_mode()
    def speak(self, rows: Sequence[Row]) -> list[Spoken]:
        """Each row's whole audio and durations, all rows in one batch."""
        tokens, lengths, style, speed = self.inputs(rows)
        durations, d = self.model.front.durations(tokens, lengths, style, speed)
        counts = durations.to(torch.int64).cpu().numpy()  # the one read-back: it sizes the decoder's call
        frames = counts.sum(-1)
        frame_count = bucket(int(frames.max()), self.frame_buckets)
        asr, f0, energy, phase = self.model.front.features(tokens, lengths, style, durations, d, frame_count)
        frames_t = torch.from_numpy(frames).to(self.device)
        audio = self.model.decoder(asr, f0, energy, phase, style, frames_t).float().cpu().numpy()
        return [
            Spoken(audio[i, : int(frames[i]) * SAMPLES_PER_FRAME], counts[i, : len(r.tokens)])
            for i, r in enumerate(rows)
        ]
