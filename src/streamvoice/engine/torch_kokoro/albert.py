"""PL-BERT, the ALBERT that reads Kokoro's phonemes: one shared layer applied twelve times, padded keys masked
out of attention."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

VOCAB = 178
EMBEDDING = 128
HIDDEN = 768
HEADS = 12
INTERMEDIATE = 2048
LAYERS = 12
POSITIONS = 512


class Embeddings(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, EMBEDDING)
        self.position_embeddings = nn.Embedding(POSITIONS, EMBEDDING)
        self.token_type_embeddings = nn.Embedding(2, EMBEDDING)
        self.LayerNorm = nn.LayerNorm(EMBEDDING, eps=1e-12)

    def forward(self, tokens: Tensor) -> Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.word_embeddings(tokens) + self.position_embeddings(positions)[None]
        return self.LayerNorm(x + self.token_type_embeddings.weight[0])


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.query = nn.Linear(HIDDEN, HIDDEN)
        self.key = nn.Linear(HIDDEN, HIDDEN)
        self.value = nn.Linear(HIDDEN, HIDDEN)
        self.dense = nn.Linear(HIDDEN, HIDDEN)
        self.LayerNorm = nn.LayerNorm(HIDDEN, eps=1e-12)

    def forward(self, x: Tensor, key_bias: Tensor) -> Tensor:
        b, t, _ = x.shape

        def heads(h: Tensor) -> Tensor:
            return h.view(b, t, HEADS, HIDDEN // HEADS).transpose(1, 2)

        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(HIDDEN // HEADS) + key_bias
        context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, HIDDEN)
        return self.LayerNorm(x + self.dense(context))


class Layer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attention = Attention()
        self.ffn = nn.Linear(HIDDEN, INTERMEDIATE)
        self.ffn_output = nn.Linear(INTERMEDIATE, HIDDEN)
        self.full_layer_layer_norm = nn.LayerNorm(HIDDEN, eps=1e-12)

    def forward(self, x: Tensor, key_bias: Tensor) -> Tensor:
        attended = self.attention(x, key_bias)
        ffn = self.ffn_output(F.gelu(self.ffn(attended), approximate="tanh"))
        return self.full_layer_layer_norm(ffn + attended)


class Albert(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embeddings = Embeddings()
        self.mapping_in = nn.Linear(EMBEDDING, HIDDEN)
        self.layer = Layer()

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        steps = torch.arange(tokens.shape[1], device=tokens.device)
        padded = steps[None, :] >= lengths[:, None]
        key_bias = torch.where(padded, torch.finfo(torch.float32).min, 0.0)[:, None, None, :]
        x = self.mapping_in(self.embeddings(tokens))
        for _ in range(LAYERS):
            x = self.layer(x, key_bias)
        return x
