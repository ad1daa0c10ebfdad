"""A padded batch gives each row what it gives alone: same durations, the decoder's inputs equal to the batched
LSTMs' rounding, and audio a listener cannot tell apart. Rows differ in length, speed and voice, and the
longest sets the buckets, so every other row is padded in tokens and in frames."""

from __future__ import annotations

import numpy as np
import torch
from pesq import pesq

from streamvoice.bench.asr import resample
from streamvoice.engine.torch_kokoro.model import Kokoro, Row, Runner
from tests_torch.conftest import Said

# Stated bounds. Batched LSTMs and matrix products round differently from one row's (about 1e-4 Hz of F0);
# the harmonic source's angle at rounding-noise bins then differs, which is why audio is compared by PESQ.
MAX_F0_DIFF_HZ = 1e-2
MIN_PESQ = 4.3


def rows(said: list[Said]) -> list[Row]:
    first, second, third = said[0].row, said[3].row, said[5].row
    return [
        Row([*first.tokens[:40], 0], first.style),
        Row([*second.tokens[:24], 0], second.style, 1.25),
        Row([*third.tokens[:30], 0], third.style, 0.8),
        Row([0, *first.tokens[1:9], 0], said[1].row.style),
    ]


def test_a_padded_batch_gives_each_row_what_it_gives_alone(kokoro: Kokoro, said: list[Said]) -> None:
    runner = Runner(kokoro)  # each row alone unpadded; together, every row but the longest padded
    batch = rows(said)
    together = runner.speak(batch)
    alone = [runner.speak([row])[0] for row in batch]
    assert len({len(r.tokens) for r in batch}) == len(batch)
    for row, a, t in zip(batch, alone, together, strict=True):
        assert np.array_equal(a.durations, t.durations), row.speed
        assert a.audio.shape == t.audio.shape
        score = pesq(16000, resample(a.audio, 24000), resample(t.audio, 24000), "wb")
        assert score >= MIN_PESQ, (len(row.tokens), score)
        assert np.abs(t.audio).max() > 0.05  # speech, not silence that would match anything


def test_the_decoders_inputs_for_a_padded_row_equal_its_own(kokoro: Kokoro, said: list[Said]) -> None:
    runner = Runner(kokoro)
    batch = rows(said)
    tokens, lengths, style, speed = runner.inputs(batch)
    with torch.inference_mode():
        durations, d = kokoro.front.durations(tokens, lengths, style, speed)
        frames = int(durations.sum(-1).max())
        together = kokoro.front.features(tokens, lengths, style, durations, d, frames + 7)
        for i, row in enumerate(batch):
            t1, l1, s1, v1 = runner.inputs([row])
            dur1, d1 = kokoro.front.durations(t1, l1, s1, v1)
            alone = kokoro.front.features(t1, l1, s1, dur1, d1, int(dur1.sum()))
            n = int(dur1.sum())
            asr, f0, energy, phase = (x[i : i + 1] for x in together)
            assert torch.equal(dur1[0, : len(row.tokens)], durations[i, : len(row.tokens)])
            assert (asr[..., :n] - alone[0]).abs().max() < 1e-4
            assert (asr[..., n:]).abs().max() == 0  # padding frames are silent inputs
            assert (f0[..., : 2 * n] - alone[1]).abs().max() < MAX_F0_DIFF_HZ
            assert (energy[..., : 2 * n] - alone[2]).abs().max() < 1e-3
            assert (phase[..., : 2 * n] - alone[3]).abs().max() < 0.1
