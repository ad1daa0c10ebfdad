"""Kokoro's blocks with per-row lengths: every statistic, recurrence and convolution sees a row's valid frames
only, so padding a row into a batch never changes its result.

Three rules make that hold, each checked by ``tests_torch/test_batching.py``:

- instance norms take their mean and variance over valid frames (``masked_instance_norm``);
- a convolution's input is zeroed past each row's end first, which is what the row's own zero padding gives;
- the backward half of a BiLSTM reads each row's valid prefix reversed (``reverse_valid``), never its padding.

No function here reads a tensor back to the host or makes a shape from data, so a call can be captured as a
CUDA graph (``tests_torch/test_graph_safety.py``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def valid_mask(lengths: Tensor, size: int) -> Tensor:
    """[B, 1, size] float: 1 where a frame is inside its row."""
    steps = torch.arange(size, device=lengths.device)
    return (steps[None, :] < lengths[:, None]).to(torch.float32)[:, None, :]


def masked_instance_norm(x: Tensor, mask: Tensor, count: Tensor, eps: float = 1e-5) -> Tensor:
    """Instance norm over valid frames (``count`` [B, 1, 1] of them); padded frames come out as garbage that
    the next masked step discards."""
    mean = (x * mask).sum(-1, keepdim=True) / count
    centred = x - mean
    var = (centred * centred * mask).sum(-1, keepdim=True) / count
    return centred / torch.sqrt(var + eps)


def reverse_valid(x: Tensor, lengths: Tensor) -> Tensor:
    """[B, T, C] with each row's first ``length`` steps reversed and its padding left in place."""
    steps = torch.arange(x.shape[1], device=x.device)[None, :]
    index = torch.where(steps < lengths[:, None], lengths[:, None] - 1 - steps, steps)
    return torch.gather(x, 1, index[:, :, None].expand(-1, -1, x.shape[2]))


def replicate_past_end(x: Tensor, lengths: Tensor) -> Tensor:
    """[B, C, T] with every step past a row's end holding its last valid value (what an interpolation's edge
    clamp gives a row alone)."""
    steps = torch.arange(x.shape[-1], device=x.device)[None, :]
    index = torch.minimum(steps, (lengths - 1)[:, None])
    return torch.gather(x, 2, index[:, None, :].expand(-1, x.shape[1], -1))


class BiLSTM(nn.Module):
    """A bidirectional LSTM over padded rows, without packing: two one-way LSTMs, the second over each row's
    reversed valid prefix. Padded steps come out as zeros."""

    def __init__(self, inputs: int, hidden: int) -> None:
        super().__init__()
        self.forward_lstm = nn.LSTM(inputs, hidden, batch_first=True)
        self.backward_lstm = nn.LSTM(inputs, hidden, batch_first=True)

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
        ahead, _ = self.forward_lstm(x)
        behind, _ = self.backward_lstm(reverse_valid(x, lengths))
        out = torch.cat([ahead, reverse_valid(behind, lengths)], dim=-1)
        return out * valid_mask(lengths, x.shape[1]).transpose(1, 2)


class AdaIN1d(nn.Module):
    """Instance norm scaled and shifted by the style."""

    def __init__(self, style_dim: int, channels: int) -> None:
        super().__init__()
        self.fc = nn.Linear(style_dim, channels * 2)

    def forward(self, x: Tensor, s: Tensor, mask: Tensor, count: Tensor) -> Tensor:
        gamma, beta = self.fc(s)[:, :, None].chunk(2, dim=1)
        return (1 + gamma) * masked_instance_norm(x, mask, count) + beta


class AdaLayerNorm(nn.Module):
    """Layer norm over channels, scaled and shifted by the style; x is [B, T, C]."""

    def __init__(self, style_dim: int, channels: int) -> None:
        super().__init__()
        self.channels = channels
        self.fc = nn.Linear(style_dim, channels * 2)

    def forward(self, x: Tensor, s: Tensor) -> Tensor:
        gamma, beta = self.fc(s)[:, None, :].chunk(2, dim=-1)
        return (1 + gamma) * F.layer_norm(x, (self.channels,), eps=1e-5) + beta


class AdainResBlk1d(nn.Module):
    """The predictor's and decoder's residual block; ``upsample`` doubles its frames."""

    def __init__(self, dim_in: int, dim_out: int, style_dim: int, upsample: bool = False) -> None:
        super().__init__()
        self.upsample = upsample
        self.conv1 = nn.Conv1d(dim_in, dim_out, 3, 1, 1)
        self.conv2 = nn.Conv1d(dim_out, dim_out, 3, 1, 1)
        self.norm1 = AdaIN1d(style_dim, dim_in)
        self.norm2 = AdaIN1d(style_dim, dim_out)
        self.conv1x1 = nn.Conv1d(dim_in, dim_out, 1, 1, 0, bias=False) if dim_in != dim_out else None
        self.pool = (
            nn.ConvTranspose1d(dim_in, dim_in, 3, stride=2, groups=dim_in, padding=1, output_padding=1)
            if upsample
            else None
        )

    def forward(self, x: Tensor, s: Tensor, lengths: Tensor) -> Tensor:
        mask, count = valid_mask(lengths, x.shape[-1]), lengths[:, None, None].to(x.dtype)
        h = F.leaky_relu(self.norm1(x, s, mask, count), 0.2) * mask
        shortcut = x
        if self.pool is not None:
            lengths = lengths * 2
            mask, count = valid_mask(lengths, 2 * x.shape[-1]), count * 2
            h = self.pool(h) * mask
            shortcut = F.interpolate(x, scale_factor=2.0, mode="nearest")
        h = self.conv1(h)
        h = F.leaky_relu(self.norm2(h, s, mask, count), 0.2) * mask
        h = self.conv2(h)
        if self.conv1x1 is not None:
            shortcut = self.conv1x1(shortcut)
        return (h + shortcut) * (2.0**-0.5) * mask


class AdaINResBlock1(nn.Module):
    """The generator's residual block: three dilated convolutions, each between AdaIN and a snake."""

    def __init__(self, channels: int, kernel: int, dilations: tuple[int, ...], style_dim: int) -> None:
        super().__init__()
        self.convs1 = nn.ModuleList(
            nn.Conv1d(channels, channels, kernel, dilation=d, padding=d * (kernel - 1) // 2)
            for d in dilations
        )
        self.convs2 = nn.ModuleList(
            nn.Conv1d(channels, channels, kernel, padding=(kernel - 1) // 2) for _ in dilations
        )
        self.adain1 = nn.ModuleList(AdaIN1d(style_dim, channels) for _ in dilations)
        self.adain2 = nn.ModuleList(AdaIN1d(style_dim, channels) for _ in dilations)
        self.alpha1 = nn.ParameterList(nn.Parameter(torch.ones(1, channels, 1)) for _ in dilations)
        self.alpha2 = nn.ParameterList(nn.Parameter(torch.ones(1, channels, 1)) for _ in dilations)

    def forward(self, x: Tensor, s: Tensor, mask: Tensor, count: Tensor) -> Tensor:
        for c1, c2, n1, n2, a1, a2 in zip(
            self.convs1, self.convs2, self.adain1, self.adain2, self.alpha1, self.alpha2, strict=True
        ):
            h = snake(n1(x, s, mask, count), a1) * mask
            h = snake(n2(c1(h), s, mask, count), a2) * mask
            x = c2(h) + x
        return x * mask


def snake(x: Tensor, alpha: Tensor) -> Tensor:
    return x + (1 / alpha) * torch.sin(alpha * x) ** 2
