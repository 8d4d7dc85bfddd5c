"""A torch.compile'd function on the CPU that prints whether Inductor was asked for its own
estimates (``benchmark_kernel``): the worker asks, so that on a GPU Inductor writes each
kernel's FLOPs and bytes on its profiler record."""

import torch
import torch._inductor.config as inductor_config


@torch.compile
def _fused(x):
    return (x.cos() + 1).relu()


def compiled(x):
    print("benchmark_kernel", inductor_config.benchmark_kernel)
    return _fused(x)


def compiled_inputs(batch_size: int = 1, device: str = "cpu"):
    return (torch.randn(256 * batch_size, 256, device=device),)
