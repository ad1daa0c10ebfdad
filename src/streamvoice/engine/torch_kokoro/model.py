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
STYLE_SIZE = 256
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
        """Tokens, lengths, style rows and speeds on the model's device, from one packed copy: each row is
        [tokens (padded) | length | style (256) | speed] in float32 (token ids and lengths are exact there),
        pinned on a GPU so the copy is asynchronous."""
        width = bucket(max(len(r.tokens) for r in rows), self.token_buckets)
        packed = np.zeros((len(rows), width + 2 + STYLE_SIZE), dtype=np.float32)
        for i, r in enumerate(rows):
            packed[i, : len(r.tokens)] = r.tokens
            packed[i, width] = len(r.tokens)
            packed[i, width + 1 : width + 1 + STYLE_SIZE] = np.asarray(r.style, dtype=np.float32).reshape(-1)
            packed[i, -1] = r.speed
        host = torch.from_numpy(packed)
        if self.device.type == "cuda":
            host = host.pin_memory()
        on = host.to(self.device, non_blocking=True)
        tokens = on[:, :width].to(torch.int64)
        lengths = on[:, width].to(torch.int64)
        return tokens, lengths, on[:, width + 1 : width + 1 + STYLE_SIZE], on[:, -1]

    @torch.inference_mode()
    def speak(self, rows: Sequence[Row]) -> list[Spoken]:
        """Each row's whole audio and durations, all rows in one batch (``batch`` may add filler rows)."""
        tokens, lengths, style, speed = self.inputs(self.batch(rows))
        durations, d = self.front(tokens, lengths, style, speed)
        counts = durations.to(torch.int64).cpu().numpy()  # the one read-back: it sizes the decoder's call
        frames = counts.sum(-1)
        frame_count = bucket(int(frames.max()), self.frame_buckets)
        frames_t = torch.from_numpy(frames).to(self.device, non_blocking=True)
        audio = self.back(frame_count, tokens, lengths, style, durations, d, frames_t).cpu().numpy()
        return [
            Spoken(audio[i, : int(frames[i]) * SAMPLES_PER_FRAME], counts[i, : len(r.tokens)])
            for i, r in enumerate(rows)
        ]

    def batch(self, rows: Sequence[Row]) -> Sequence[Row]:
        """The rows a call runs: these (a captured runner fills them to a batch bucket)."""
        return rows

    def front(self, tokens: Tensor, lengths: Tensor, style: Tensor, speed: Tensor) -> tuple[Tensor, Tensor]:
        """The first half: durations, and the prosody encoding the second half reads."""
        durations, d = self.model.front.durations(tokens, lengths, style, speed)
        return durations, d

    def back(
        self,
        frame_count: int,
        tokens: Tensor,
        lengths: Tensor,
        style: Tensor,
        durations: Tensor,
        d: Tensor,
        frames: Tensor,
    ) -> Tensor:
        """The second half over ``frame_count`` frames: the decoder's inputs, then the audio."""
        features = self.model.front.features(tokens, lengths, style, durations, d, frame_count)
        audio: Tensor = self.model.decoder(*features, style, frames)
        return audio
