# pyright: basic
"""A job's ranks: the process group a launcher started this worker into (torchrun's
variables), and the agreements that keep every rank making as many calls."""

import contextlib
import datetime
import os
import socket

from .errors import JobError
from .names import DIST_LOCAL_RANK, DIST_RANK, DIST_TIMEOUT_ENV, DIST_WORLD_SIZE


def torchrun_env(rank, world, port):
    """The variables torchrun gives rank `rank` of `world` on one host (the server's twin:
    kernelscope.engine.ranks.rank_env)."""
    return {
        DIST_RANK: str(rank),
        DIST_WORLD_SIZE: str(world),
        DIST_LOCAL_RANK: str(rank),
        "LOCAL_WORLD_SIZE": str(world),
        "GROUP_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
    }


def rank_device(torch, want):
    """The device a rank runs on: its own GPU (LOCAL_RANK) when it asks for CUDA."""
    local = os.environ.get(DIST_LOCAL_RANK)
    if local is not None and want in ("auto", "cuda") and torch.cuda.is_available():
        count = torch.cuda.device_count()
        if int(local) >= count:  # one GPU per rank, as torchrun
            raise JobError(
                "bad_device",
                "rank %s needs cuda:%s, but %s has %d CUDA device(s): profile on %d "
                "ranks or fewer (nproc), or on the CPU (gloo)"
                % (local, local, socket.gethostname(), count, count),
            )
        want = "cuda:%s" % local
    return want


class Ranks:
    """The process group of a job of several ranks; a no-op in a job of one process."""

    def __init__(self, torch):
        self.torch = torch
        self.dist = None  # torch.distributed, once joined
        self.device = None

    def join(self, device):
        """Join the group when the launcher started the worker as one of N ranks: NCCL on a
        GPU, gloo on the CPU; collectives time out after KERNELSCOPE_DIST_TIMEOUT seconds,
        so a hang fails on its line."""
        if int(os.environ.get(DIST_WORLD_SIZE, "1")) <= 1:
            return
        dist = self.torch.distributed
        if device.type == "cuda":
            self.torch.cuda.set_device(device)
        if not dist.is_initialized():
            timeout = float(os.environ.get(DIST_TIMEOUT_ENV, "60"))
            dist.init_process_group(
                "nccl" if device.type == "cuda" else "gloo",
                timeout=datetime.timedelta(seconds=timeout),
            )
        self.dist = dist
        self.device = device if device.type == "cuda" else self.torch.device("cpu")

    def adopt(self, device):
        """Agree through the group the program itself set up, where a program (--via) runs
        on N ranks and has initialized one by the time of its call: collectives on the CPU
        unless that group is NCCL's alone."""
        if int(os.environ.get(DIST_WORLD_SIZE, "1")) <= 1 or self.dist is not None:
            return
        dist = self.torch.distributed
        if not (dist.is_available() and dist.is_initialized()):
            return
        self.dist = dist
        nccl = str(dist.get_backend()) == "nccl" and device.type == "cuda"
        self.device = device if nccl else self.torch.device("cpu")

    def agree(self, value, op="max"):
        """The same number on every rank (the largest or smallest of theirs), so all ranks
        make as many calls of the function, and so as many collectives; the value itself
        in a job of one process."""
        dist = self.dist
        if dist is None:
            return value
        t = self.torch.tensor([float(value)], device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.MIN)
        return type(value)(t.item())

    def barrier(self):
        """Wait for every rank (the active window opens and closes in lockstep)."""
        if self.dist is not None:
            self.dist.barrier()

    def leave(self):
        """Destroy the group the job joined, if any."""
        dist = self.dist
        if dist is not None and dist.is_initialized():
            with contextlib.suppress(Exception):
                dist.destroy_process_group()
