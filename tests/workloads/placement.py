"""Inputs whose placement is observable: a module that records every .to() call on it."""

import torch
from torch import nn


class Recorder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.moves = 0

    def to(self, *args, **kwargs):
        self.moves += 1
        return super().to(*args, **kwargs)


def kept(m):
    print("moves=%d" % m.moves)
    return torch.ones(1)


def moved(m):
    print("moves=%d" % m.moves)
    return torch.ones(1)


def kept_inputs(batch_size: int = 1, device: str = "cpu"):
    return (Recorder(),)  # takes `device`: placed by the provider, kept as returned


def moved_inputs(batch_size: int = 1):
    return (Recorder(),)  # no `device`: the worker moves it to the job's device


def built(x):
    print("built on %s" % BUILT_ON[-1])
    return x * 2


BUILT_ON: list = []


def built_inputs():
    x = torch.ones(4)  # no `device`: made under the job's device, not made and then moved
    BUILT_ON.append(x.device.type)
    return (x,)
