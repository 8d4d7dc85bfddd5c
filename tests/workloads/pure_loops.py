"""Pure-Python lines whose own time is known: a comprehension and a loop of 2000 runs each,
for checking the line pass's correction of the tracer's cost (docs/cpu-run/line_tracer.sh)."""

import torch


def rows(n):
    values = [i + 0 for i in range(n)]
    return torch.tensor(values)


def loop(n):
    x = 0
    for i in range(n):
        x = i
    return torch.tensor(x)


def rows_inputs(batch_size: int = 1, device: str = "cpu"):
    return (2000 * batch_size,)


def loop_inputs(batch_size: int = 1, device: str = "cpu"):
    return (2000 * batch_size,)
