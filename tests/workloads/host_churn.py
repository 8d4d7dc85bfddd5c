"""A CPU call that takes a 64 MiB tensor each time (over glibc's largest mmap threshold, 32
MiB): freed, it goes back to the OS, and the next call faults its 16,384 pages in again."""

import torch


def churn_step(x):
    big = torch.empty(16 * 1024 * 1024)
    big.fill_(1.0)
    return big.sum() + x.sum()


def churn_step_inputs(batch_size: int = 1, device: str = "cpu"):
    return (torch.ones(4 * batch_size, device=device),)
