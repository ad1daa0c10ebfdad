"""Each captured half is one graph: no read back to the host and no shape made from data inside it, which is
what CUDA graph capture needs. TorchDynamo traces each with ``fullgraph=True`` and fails on any graph break, so
an added ``.item()``, ``.cpu()``, ``nonzero()`` or Python branch on a tensor fails this test."""

from __future__ import annotations

import torch
import torch._dynamo

from streamvoice.engine.torch_kokoro.model import Kokoro

torch._dynamo.config.allow_rnn = True  # nn.LSTM is traced as one op (cuDNN's RNN captures in a CUDA graph)


def traced(fn):  # type: ignore[no-untyped-def]
    torch._dynamo.reset()
    return torch.compile(fn, fullgraph=True, backend="eager", dynamic=False)


def test_the_front_and_the_decoder_trace_as_whole_graphs() -> None:
    torch.manual_seed(0)
    model = Kokoro().eval()  # the structure is what is checked: random weights trace as the real ones do
    batch, tokens_n, frames = 2, 32, 48
    tokens = torch.randint(1, 170, (batch, tokens_n))
    lengths = torch.tensor([tokens_n, 20])
    style = torch.randn(batch, 256)
    speed = torch.ones(batch)
    with torch.inference_mode():
        durations, d = traced(model.front.durations)(tokens, lengths, style, speed)
        assert durations.shape == (batch, tokens_n)
        durations = (torch.arange(tokens_n) < lengths[:, None]).float()

        def features(*args):  # type: ignore[no-untyped-def]
            return model.front.features(*args, frames)

        asr, f0, energy, phase = traced(features)(tokens, lengths, style, durations, d)
        audio = traced(model.decoder)(asr, f0, energy, phase, style, torch.tensor([32, 20]))
    assert audio.shape == (batch, frames * 600)
