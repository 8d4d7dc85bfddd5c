"""A call that takes a tenth of a second, mostly waiting: long against a small profiled
budget (KERNELSCOPE_PROFILED_SECONDS), so the worker profiles fewer calls than asked."""

import time

import torch


def slow_step(x):
    time.sleep(0.1)
    return x * 2


def slow_step_inputs(batch_size: int = 1, device: str = "cpu"):
    return (torch.ones(8 * batch_size, device=device),)
