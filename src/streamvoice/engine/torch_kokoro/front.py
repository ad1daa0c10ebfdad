"""The front: phonemes to durations, then to the decoder's inputs (aligned text features, F0 and energy
curves, the harmonic source's phase). It runs in two halves because a piece's frame count is known only when
its durations are: ``durations`` is one call, the host reads the frame count back (the one synchronisation
between them), and ``features`` is the second call, over a frame count padded to a bucket.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from streamvoice.engine.torch_kokoro.albert import HIDDEN, VOCAB, Albert
from streamvoice.engine.torch_kokoro.layers import AdainResBlk1d, AdaLayerNorm, BiLSTM, valid_mask

CHANNELS = 512
STYLE = 128
MAX_DURATION = 50
SAMPLE_RATE = 24000
HARMONICS = 9
# Audio samples per F0 step: the decoder's 2x upsampling, then 10 x 6 in the generator, then the iSTFT hop 5.
SAMPLES_PER_F0_STEP = 300


class LayerNorm(nn.Module):
    """Layer norm over the channels of [B, C, T]."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x.transpose(1, 2), (x.shape[1],), self.gamma, self.beta, 1e-5).transpose(1, 2)


class ConvNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(CHANNELS, CHANNELS, 5, padding=2)
        self.norm = LayerNorm(CHANNELS)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        return F.leaky_relu(self.norm(self.conv(x)), 0.2) * mask


class TextEncoder(nn.Module):
    """Phonemes to the features the decoder reads, after alignment."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, CHANNELS)
        self.cnn = nn.ModuleList(ConvNorm() for _ in range(3))
        self.lstm = BiLSTM(CHANNELS, CHANNELS // 2)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        mask = valid_mask(lengths, tokens.shape[1])
        x = self.embedding(tokens).transpose(1, 2) * mask
        for block in self.cnn:
            x = block(x, mask)
        return self.lstm(x.transpose(1, 2), lengths).transpose(1, 2)


class DurationEncoder(nn.Module):
    """Three BiLSTMs, each followed by a style-scaled layer norm, the style appended to every step."""

    def __init__(self) -> None:
        super().__init__()
        self.lstms = nn.ModuleList()
        for _ in range(3):
            self.lstms.append(BiLSTM(CHANNELS + STYLE, CHANNELS // 2))
            self.lstms.append(AdaLayerNorm(STYLE, CHANNELS))

    def forward(self, x: Tensor, s: Tensor, lengths: Tensor) -> Tensor:
        """x [B, T, C] -> [B, T, C + style]."""
        mask = valid_mask(lengths, x.shape[1]).transpose(1, 2)
        style = s[:, None, :].expand(-1, x.shape[1], -1)
        x = torch.cat([x, style], dim=-1) * mask
        for block in self.lstms:
            if isinstance(block, BiLSTM):
                x = block(x, lengths)
            else:
                x = torch.cat([block(x, s), style], dim=-1) * mask
        return x


class Predictor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.text_encoder = DurationEncoder()
        self.lstm = BiLSTM(CHANNELS + STYLE, CHANNELS // 2)
        self.duration_proj = nn.Linear(CHANNELS, MAX_DURATION)
        self.shared = BiLSTM(CHANNELS + STYLE, CHANNELS // 2)
        self.F0 = curve_blocks()
        self.N = curve_blocks()
        self.F0_proj = nn.Conv1d(CHANNELS // 2, 1, 1)
        self.N_proj = nn.Conv1d(CHANNELS // 2, 1, 1)

    def curves(self, en: Tensor, s: Tensor, frames: Tensor) -> tuple[Tensor, Tensor]:
        """Aligned prosody [B, C + style, F] -> F0 and energy [B, 2F]."""
        x = self.shared(en.transpose(1, 2), frames).transpose(1, 2)
        out = []
        for blocks, proj in ((self.F0, self.F0_proj), (self.N, self.N_proj)):
            h, lengths = x, frames
            for block in blocks:
                h = block(h, s, lengths)
                lengths = lengths * 2 if block.upsample else lengths
            out.append(proj(h)[:, 0] * valid_mask(lengths, h.shape[-1])[:, 0])
        return out[0], out[1]


def curve_blocks() -> nn.ModuleList:
    return nn.ModuleList(
        [
            AdainResBlk1d(CHANNELS, CHANNELS, STYLE),
            AdainResBlk1d(CHANNELS, CHANNELS // 2, STYLE, upsample=True),
            AdainResBlk1d(CHANNELS // 2, CHANNELS // 2, STYLE),
        ]
    )


class Front(nn.Module):
    """Tokens, the voice's style row and the speed -> durations; then, given them, the decoder's inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.bert = Albert()
        self.bert_encoder = nn.Linear(HIDDEN, CHANNELS)
        self.predictor = Predictor()
        self.text_encoder = TextEncoder()

    def durations(
        self, tokens: Tensor, lengths: Tensor, style: Tensor, speed: Tensor
    ) -> tuple[Tensor, Tensor]:
        """[B, T] frames per token (0 past a row's end) and the prosody encoding the second half reads."""
        s = style[:, STYLE:]
        d_en = self.bert_encoder(self.bert(tokens, lengths))
        d = self.predictor.text_encoder(d_en, s, lengths)
        x = self.predictor.lstm(d, lengths)
        duration = torch.sigmoid(self.predictor.duration_proj(x)).sum(-1) / speed[:, None]
        frames = torch.round(duration).clamp(min=1)
        return frames * valid_mask(lengths, tokens.shape[1])[:, 0], d

    def features(
        self, tokens: Tensor, lengths: Tensor, style: Tensor, durations: Tensor, d: Tensor, frame_count: int
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """asr [B, C, F], F0 and energy [B, 2F], phase [B, 9, 2F], over ``frame_count`` frames (a bucket at
        least the longest row's)."""
        alignment = align(durations, frame_count)
        frames = durations.sum(-1).to(torch.int64)
        en = d.transpose(1, 2) @ alignment
        f0, energy = self.predictor.curves(en, style[:, STYLE:], frames)
        asr = self.text_encoder(tokens, lengths) @ alignment
        return asr, f0, energy, harmonic_phase(f0)


def align(durations: Tensor, frame_count: int) -> Tensor:
    """[B, T, F]: 1 where frame f belongs to token t."""
    end = durations.cumsum(-1)
    start = end - durations
    f = torch.arange(frame_count, device=durations.device, dtype=durations.dtype)[None, None, :]
    return ((f >= start[:, :, None]) & (f < end[:, :, None])).to(torch.float32)


def harmonic_phase(f0: Tensor) -> Tensor:
    """The sine source's phase per F0 step for harmonics 1..9, accumulated over the piece: computed whole
    here so that any window of the decoder continues it (the same cut the ONNX engine makes)."""
    harmonics = torch.arange(1, HARMONICS + 1, device=f0.device, dtype=f0.dtype)[None, :, None]
    cycles = f0[:, None, :] * harmonics / SAMPLE_RATE
    # the exported graph's order of products, kept: the phase reaches ~1e6 rad, where float32 rounding shows
    return torch.cumsum(cycles - torch.floor(cycles), dim=-1) * 2.0 * math.pi * SAMPLES_PER_F0_STEP
