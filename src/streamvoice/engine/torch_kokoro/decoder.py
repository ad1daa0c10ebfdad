"""The decoder: aligned features and curves to audio, through Kokoro's iSTFTNet generator.

Per-row lengths run through every stage: F frames in, 2F after the last decode block, 20F and 120F + 1 in
the generator's two upsampling stages, 600F samples out. The inverse STFT mirrors the exported graph's,
including its normalisation of the first 20 samples only (what kokoro-onnx's listeners hear).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from streamvoice.engine.torch_kokoro.front import CHANNELS, HARMONICS, SAMPLES_PER_F0_STEP, STYLE
from streamvoice.engine.torch_kokoro.layers import (
    AdainResBlk1d,
    AdaINResBlock1,
    replicate_past_end,
    valid_mask,
)

N_FFT = 20
HOP = 5
BINS = N_FFT // 2 + 1
SAMPLES_PER_FRAME = 2 * SAMPLES_PER_F0_STEP
VOICED_HZ = 10.0


class Generator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l_linear = nn.Linear(HARMONICS, 1)
        self.noise_convs = nn.ModuleList(
            [nn.Conv1d(2 * BINS, 256, 12, stride=6, padding=3), nn.Conv1d(2 * BINS, 128, 1)]
        )
        self.noise_res = nn.ModuleList(
            [AdaINResBlock1(256, 7, (1, 3, 5), STYLE), AdaINResBlock1(128, 11, (1, 3, 5), STYLE)]
        )
        self.ups = nn.ModuleList(
            [nn.ConvTranspose1d(512, 256, 20, 10, padding=5), nn.ConvTranspose1d(256, 128, 12, 6, padding=3)]
        )
        self.resblocks = nn.ModuleList(
            AdaINResBlock1(ch, k, (1, 3, 5), STYLE) for ch in (256, 128) for k in (3, 7, 11)
        )
        self.conv_post = nn.Conv1d(128, 2 * BINS, 7, padding=3)
        self.register_buffer("window", torch.hann_window(N_FFT, periodic=True), persistent=False)
        self.register_buffer("inverse_basis", torch.zeros(2 * BINS, 1, N_FFT))
        self.register_buffer("window_sum", torch.zeros(N_FFT))

    def source(self, phase: Tensor, f0: Tensor, f0_steps: Tensor) -> Tensor:
        """The harmonic source's spectrum [B, 22, 120F + 1]: sines of the accumulated phase, voiced where F0 is
        above 10 Hz, merged, then an STFT over each row's own reflect padding."""
        phase = replicate_past_end(phase, f0_steps)
        upsampled = F.interpolate(phase, scale_factor=float(SAMPLES_PER_F0_STEP), mode="linear")
        voiced = (torch.repeat_interleave(f0, SAMPLES_PER_F0_STEP, dim=-1) > VOICED_HZ).to(phase.dtype)
        sines = torch.sin(upsampled) * 0.1 * voiced[:, None, :]
        merged = torch.tanh(self.l_linear(sines.transpose(1, 2)))[:, :, 0]
        samples = f0_steps * SAMPLES_PER_F0_STEP
        padded = reflect_each(merged, samples, N_FFT // 2)
        spec = torch.stft(padded, N_FFT, HOP, N_FFT, window=self.window, center=False, return_complex=True)
        frames = valid_mask(samples // HOP + 1, spec.shape[-1])
        # Bins at rounding-noise level (a constant source's upper bins) have an arbitrary angle in any
        # implementation; the exported graph's atan-of-ratio and ONNX Runtime's STFT give +pi on the negative
        # real axis, as torch.angle does. tests_torch/test_parity.py bounds what is left (PESQ, words).
        return torch.cat([spec.abs(), torch.angle(spec)], dim=1) * frames

    def forward(self, x: Tensor, s: Tensor, har: Tensor, steps: Tensor) -> Tensor:
        """x [B, 512, 2F] with ``steps`` = 2F per row -> audio [B, 600F]."""
        lengths = steps
        for i, (noise_conv, noise_res, up) in enumerate(
            zip(self.noise_convs, self.noise_res, self.ups, strict=True)
        ):
            lengths = lengths * (10 if i == 0 else 6) + (1 if i == 1 else 0)
            size = x.shape[-1] * (10 if i == 0 else 6) + (1 if i == 1 else 0)
            mask, count = valid_mask(lengths, size), lengths[:, None, None].to(x.dtype)
            x = F.leaky_relu(x, 0.1)
            x_source = noise_res(noise_conv(har) * mask, s, mask, count)
            x = up(x)
            if i == 1:
                x = F.pad(x, (1, 0), mode="reflect")
            x = (x + x_source) * mask
            blocks = self.resblocks[i * 3 : i * 3 + 3]
            x = sum((block(x, s, mask, count) for block in blocks), torch.zeros_like(x)) / 3
        x = self.conv_post(F.leaky_relu(x) * mask)
        spec = torch.exp(x[:, :BINS])
        angle = torch.sin(x[:, BINS:])
        return self.inverse(spec, angle)

    def inverse(self, spec: Tensor, angle: Tensor) -> Tensor:
        stacked = torch.cat([spec * torch.cos(angle), spec * torch.sin(angle)], dim=1)
        raw = F.conv_transpose1d(stacked, self.inverse_basis, stride=HOP)[:, 0]
        head = raw[:, :N_FFT]
        normalised = torch.where(self.window_sum > 1.1754944e-38, head / self.window_sum, head)
        raw = torch.cat([normalised, raw[:, N_FFT:]], dim=-1) * (N_FFT / HOP)
        return raw[:, N_FFT // 2 : -(N_FFT // 2)]


def reflect_each(x: Tensor, lengths: Tensor, pad: int) -> Tensor:
    """[B, T] -> [B, T + 2 pad], each row reflect-padded at its own end (its padding past that is zeros)."""
    t = torch.arange(x.shape[-1] + 2 * pad, device=x.device)[None, :] - pad
    last = (lengths - 1)[:, None]
    index = torch.where(t < 0, -t, torch.where(t > last, 2 * last - t, t))
    inside = (t <= last + pad).to(x.dtype)
    return torch.gather(x, 1, index.clamp(min=0, max=x.shape[-1] - 1)) * inside


class Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encode = AdainResBlk1d(CHANNELS + 2, 1024, STYLE)
        self.decode = nn.ModuleList(
            [AdainResBlk1d(1024 + 2 + 64, 1024, STYLE) for _ in range(3)]
            + [AdainResBlk1d(1024 + 2 + 64, 512, STYLE, upsample=True)]
        )
        self.F0_conv = nn.Conv1d(1, 1, 3, stride=2, padding=1)
        self.N_conv = nn.Conv1d(1, 1, 3, stride=2, padding=1)
        self.asr_res = nn.Conv1d(CHANNELS, 64, 1)
        self.generator = Generator()

    def forward(
        self, asr: Tensor, f0: Tensor, energy: Tensor, phase: Tensor, style: Tensor, frames: Tensor
    ) -> Tensor:
        """asr [B, 512, F], f0 / energy [B, 2F], phase [B, 9, 2F], style [B, 256], frames [B] -> [B, 600F]."""
        s = style[:, :STYLE]
        steps = frames * 2
        curve_mask = valid_mask(steps, f0.shape[-1])[:, 0]
        f0, energy = f0 * curve_mask, energy * curve_mask
        frame_mask = valid_mask(frames, asr.shape[-1])
        f0_down = self.F0_conv(f0[:, None]) * frame_mask
        n_down = self.N_conv(energy[:, None]) * frame_mask
        x = self.encode(torch.cat([asr, f0_down, n_down], dim=1), s, frames)
        residual = self.asr_res(asr)
        lengths = frames
        for block in self.decode:
            x = block(torch.cat([x, residual, f0_down, n_down], dim=1), s, lengths)
        har = self.generator.source(phase, f0, steps)
        audio = self.generator(x, s, har, steps)
        return audio * valid_mask(frames * SAMPLES_PER_FRAME, audio.shape[-1])[:, 0]
