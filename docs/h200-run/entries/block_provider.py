"""Block.forward of tests/workloads/minigpt at config/h200.py's shapes, from an input
provider: the same call the --via runs capture, built by hand (train mode, grad on)."""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../tests/workloads/minigpt"))
from model import Block, GPTConfig

CONFIG = GPTConfig(vocab_size=43, block_size=512, n_layer=6, n_head=16, n_embd=1024, bias=True)


def block_forward(block, x):
    return block(x)


def block_forward_inputs(device="cuda"):
    torch.manual_seed(0)
    block = Block(CONFIG).to(device).train()
    x = torch.randn(32, 512, 1024, device=device)
    return (block, x)


def block_forward_bf16(block, x):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return block(x)


block_forward_bf16_inputs = block_forward_inputs
