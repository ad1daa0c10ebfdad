"""Kokoro as one module: the front and the decoder, loaded from the official files."""

from __future__ import annotations

from torch import nn

from streamvoice.engine.torch_kokoro.decoder import Decoder
from streamvoice.engine.torch_kokoro.front import Front


class Kokoro(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.front = Front()
        self.decoder = Decoder()
