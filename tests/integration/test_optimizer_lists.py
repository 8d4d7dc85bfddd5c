"""The optimizers' tensor lists, live: the worker counts each list the optimizers that step in
the cold call run over (per parameter group, device and dtype), so a foreach step whose long
lists the trace keeps without shapes gets its elements, not a bound from the grids."""

from __future__ import annotations

import torch

from kernelscope.worker.program.optimizers import CHUNK, StepWatch

from support import WORKLOADS
from support.cli_sidecar import cpu_sidecar

SPEC = f"{WORKLOADS / 'memory_train.py'}::train_step"


def test_the_sidecar_has_the_training_steps_optimizer_list() -> None:
    sidecar = cpu_sidecar(SPEC)
    # Mlp: Linear(256, 1024) and Linear(1024, 256), weights 4 chunks each, biases 1 each
    assert sidecar["optimizer_lists"] == [
        {
            "optimizer": "AdamW",
            "device": "cpu",
            "dtype": "float32",
            "tensors": 4,
            "elements": 2 * 256 * 1024 + 1024 + 256,
            "chunks": 10,
        }
    ]


def test_each_group_device_and_dtype_is_a_list_of_the_parameters_with_gradients() -> None:
    """The optimizers that step while the watch is open (torch.optim's global step
    pre-hook), each list as torch.optim groups a step's tensors: per parameter group, per
    device and dtype, of the parameters that have a gradient as the step begins (a frozen
    one, or one the loss did not reach, is in none: the step skips it)."""
    big = torch.nn.Parameter(torch.zeros(CHUNK + 1))  # two chunks
    small = torch.nn.Parameter(torch.zeros(3))
    half = torch.nn.Parameter(torch.zeros(5, dtype=torch.bfloat16))
    frozen = torch.nn.Parameter(torch.zeros(7), requires_grad=False)
    unused = torch.nn.Parameter(torch.zeros(11))
    other = torch.nn.Parameter(torch.ones(2))
    for p in (big, small, half, other):
        p.grad = torch.ones_like(p)
    opt = torch.optim.SGD(
        [{"params": [big, small, half, unused]}, {"params": [frozen, other]}], lr=0.1
    )
    idle = torch.optim.Adam([torch.nn.Parameter(torch.zeros(4))])  # never steps: not seen
    with StepWatch() as watch:
        opt.step()
        opt.step()  # once is enough
    opt.step()  # after: not watched
    assert watch.lists() == [
        {"optimizer": "SGD", "device": "cpu", "dtype": "float32", "tensors": 2,
         "elements": CHUNK + 4, "chunks": 3},
        {"optimizer": "SGD", "device": "cpu", "dtype": "bfloat16", "tensors": 1,
         "elements": 5, "chunks": 1},
        {"optimizer": "SGD", "device": "cpu", "dtype": "float32", "tensors": 1,
         "elements": 2, "chunks": 1},
    ]  # fmt: skip
    assert watch.stepped == [opt] and all(o is not idle for o in watch.stepped)
