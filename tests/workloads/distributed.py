"""Distributed workloads for `kernelscope profile --nproc N` on the CPU (gloo)."""

import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


def train_step_inputs(rank: int = 0, world_size: int = 1):
    torch.manual_seed(rank)
    net = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128))
    model = DDP(net)
    return (model, torch.optim.SGD(model.parameters(), lr=0.01), torch.randn(32, 128), torch.randn(32, 128))


def uneven(x, total):
    y = x @ x.T
    for _ in range(4):
        y = y @ x @ x.T
    total.copy_(y.sum().reshape(1))
    dist.all_reduce(total)
    return total


def uneven_inputs(rank: int = 0, world_size: int = 1):
    # The last rank gets 16x the rows: the others wait for it in all_reduce.
    rows = 32 * (16 if rank == world_size - 1 else 1)
    return (torch.randn(rows, 256) / 16, torch.zeros(1))


def raises(x):
    if dist.get_rank() == 1:
        raise ValueError("rank 1 has a bad shard")
    dist.all_reduce(x)
    return x


def raises_inputs():
    return (torch.ones(8),)


def hangs(x):
    if dist.get_rank() == 1:
        time.sleep(600)
    dist.all_reduce(x)
    return x


def hangs_inputs():
    return (torch.ones(8),)


def crashes(x):
    import os  # here: the lines above are named in tests
    import signal

    if dist.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGKILL)  # gone without a word, as the OOM killer does
    dist.all_reduce(x)
    return x


def crashes_inputs():
    return (torch.ones(8),)
