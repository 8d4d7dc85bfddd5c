"""Models shaped like nanoGPT's model.py (a GPTConfig dataclass, all fields defaulted) and a
plain module whose constructor takes annotated ints."""

from dataclasses import dataclass
import torch
import torch.nn as nn


@dataclass
class GPTConfig:
    block_size: int = 32
    vocab_size: int = 256
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    dropout: float = 0.0
    bias: bool = True


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)

    def forward(self, x):
        return self.proj(torch.relu(self.fc(x)))


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.mlp = MLP(config)

    def forward(self, idx, targets=None):
        return self.mlp(self.wte(idx))


class Scaler(nn.Module):
    def __init__(self, dim: int, hidden: int, scale: float = 2.0, act: str = "relu"):
        super().__init__()
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)
        self.scale = scale

    def forward(self, x: torch.Tensor, k: int) -> torch.Tensor:
        return self.down(self.up(x)).relu() * self.scale * k
