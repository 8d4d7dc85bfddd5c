"""A call of 4,000 small adds, five ops each (a Python scalar is copied to a tensor): 20,000
profiler events a call, against a small memory allowance for them (KERNELSCOPE_PROFILER_GB)."""

import torch


def many_adds(x):
    for _ in range(4000):
        x = x + 1
    return x


def many_adds_inputs(batch_size: int = 1, device: str = "cpu"):
    return (torch.zeros(8 * batch_size, device=device),)
