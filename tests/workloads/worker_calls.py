"""A program whose Dataset is called only in its DataLoader's worker processes.

    python worker_calls.py [--handle] [--main-too] [--start-method fork|spawn|forkserver]

--handle gives the dataset an open file, which cannot be pickled; with --main-too the main
process reads an item itself after each batch.
"""

import argparse

import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info


class Rows(Dataset):
    """Rows of a random matrix, each scaled by a per-worker factor."""

    def __init__(self, n: int, handle: bool, main_too: bool) -> None:
        self.x = torch.randn(n, 64)
        self.log = open(__file__) if handle else None  # noqa: SIM115
        self.scale = 1.0
        self.main_too = main_too

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> torch.Tensor:
        info = get_worker_info()
        assert info is not None or self.main_too, "called outside a DataLoader worker"
        return (self.x[i] @ self.x[i]).sqrt() * self.scale + (info.id if info else -1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--handle", action="store_true")
    parser.add_argument("--main-too", action="store_true")
    parser.add_argument("--start-method", default="fork")
    opts = parser.parse_args()
    rows = Rows(512, opts.handle, opts.main_too)
    loader = DataLoader(
        rows,
        batch_size=16,
        num_workers=2,
        multiprocessing_context=opts.start_method,
    )
    total = 0.0
    for _ in range(2):
        for batch in loader:
            total += float(batch.sum())
            if opts.main_too:
                total += float(rows[0])
    print(f"sum {total:.1f}")
