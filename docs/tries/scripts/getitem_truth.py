"""MNIST.__getitem__ timed in fresh processes that never profiled, two ways: back to back in
a process with 1 torch thread (as kernelscope replays a DataLoader worker's call), and in
place in real DataLoader workers (each call stamped with perf_counter inside the worker).

    PYTHONPATH=... python getitem_truth.py DATA_DIR [workers]
"""

import statistics
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset
from torchvision.datasets import MNIST
from torchvision.transforms import transforms

root = sys.argv[1]
workers = int(sys.argv[2]) if len(sys.argv) > 2 else 2
tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])
ds = MNIST(root, train=True, transform=tf)


class Stamped(Dataset):
    """Each item with the seconds its __getitem__ took, inside whatever process runs it."""

    def __len__(self):
        return len(ds)

    def __getitem__(self, i):
        t = time.perf_counter()
        item = ds[i]
        return item, time.perf_counter() - t


def back_to_back(n=5000):
    torch.set_num_threads(1)
    idx = torch.randint(0, len(ds), (n,)).tolist()
    for i in idx[:200]:
        ds[i]
    out = []
    for i in idx:
        t = time.perf_counter()
        ds[i]
        out.append(time.perf_counter() - t)
    return statistics.median(out) * 1e6


def in_workers(batches=40):
    loader = DataLoader(Stamped(), batch_size=128, shuffle=True, num_workers=workers)
    times = []
    for k, (_, dt) in enumerate(loader):
        if k >= 2:  # past the workers' first batches
            times += dt.tolist()
        if k >= batches:
            break
    return statistics.median(times) * 1e6


if __name__ == "__main__":
    print(f"in {workers} DataLoader workers: {in_workers():.1f} us median per call")
    print(f"back to back, 1 thread: {back_to_back():.1f} us median per call")
