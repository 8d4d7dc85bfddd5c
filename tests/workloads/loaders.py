"""Functions whose calls start DataLoader workers: forked, spawned and from a forkserver.

A forked child inherits the worker process whole; it must end as its own process, not as
the worker (kernelscope's os._exit hook once reported every DataLoader worker's exit as the
job's)."""

import torch
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):
    """Items made on the CPU in the loader's workers."""

    def __len__(self):
        return 16

    def __getitem__(self, i):
        x = torch.full((8,), float(i))
        return x * x


def _total(method, pin_memory=False):
    loader = DataLoader(
        Squares(), batch_size=4, num_workers=2, multiprocessing_context=method, pin_memory=pin_memory
    )
    total = torch.zeros(8)
    for batch in loader:
        total += batch.sum(0)
    return total


def forked():
    return _total("fork")


def spawned():
    return _total("spawn")


def from_forkserver():
    return _total("forkserver")
