"""Profile targets for bench/loop_latency.py, pure torch, on CPU or CUDA.

`model_step`: a small conv stem + transformer blocks forward (no grad), 257 aten ops per
call (cpu_op events of one call under torch.profiler on CPU, torch 2.13), a few ms on CPU.
`one_matmul`: a single 256x256 fp32 `a @ b`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

DIM = 128
HEADS = 4
BLOCKS = 2


class Block(nn.Module):
    """Pre-norm attention + MLP, with its residuals."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        qkv = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        a = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class LoopModel(nn.Module):
    """Two convs (stride 2, then 4) to 8x8 tokens, BLOCKS transformer blocks, mean-pool, a head."""

    def __init__(self, dim: int = DIM, heads: int = HEADS, blocks: int = BLOCKS) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, dim, 4, stride=4),
        )
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(blocks))
        self.head = nn.Linear(dim, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x).flatten(2).transpose(1, 2)
        for block in self.blocks:
            x = block(x)
        return self.head(x.mean(dim=1))


def model_step(model: LoopModel, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(x)


def model_step_inputs(device: str = "cpu") -> tuple[LoopModel, torch.Tensor]:
    with torch.device(device):
        model = LoopModel().eval()
        x = torch.randn(4, 3, 64, 64)
    return (model, x)


def one_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b


def one_matmul_inputs(device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    with torch.device(device):
        a = torch.randn(256, 256)
        b = torch.randn(256, 256)
    return (a, b)
