"""flex_attention with a causal block mask made once, beside the inputs (as a training
script makes it), on the CPU: the worker reads the live mask's density after the cold call."""

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention


def _causal(b, h, q, kv):
    return q >= kv


def attend(q, k, v, mask):
    return flex_attention(q, k, v, block_mask=mask)


def attend_inputs(batch_size: int = 1, device: str = "cpu"):
    q, k, v = (torch.randn(batch_size, 2, 512, 16, device=device) for _ in range(3))
    mask = create_block_mask(_causal, None, None, 512, 512, device=device)
    return q, k, v, mask
