"""Character-level data: a text file cut into fixed windows, with a little random jitter
on where each window starts, served through a DataLoader."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info


class CharDataset(Dataset):
    """Windows of ``block_size + 1`` characters from one split of a text file.

    The vocabulary comes from the whole file, so train and val agree on it. The split is
    cut into ``len(self)`` slots of ``block_size + 1 + jitter`` characters; item ``i`` is
    the window that starts a random 0..jitter characters into slot ``i``. Returns
    ``(x, y)``: the window's first ``block_size`` tokens and the same shifted by one.
    """

    def __init__(
        self,
        path: str = "data/input.txt",
        block_size: int = 32,
        split: str = "train",
        val_fraction: float = 0.1,
        jitter: int = 8,
    ):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        self.chars = sorted(set(text))
        self.stoi = {ch: i for i, ch in enumerate(self.chars)}
        cut = int(len(text) * (1.0 - val_fraction))
        part = text[:cut] if split == "train" else text[cut:]
        self.tokens = torch.tensor([self.stoi[ch] for ch in part], dtype=torch.long)
        self.block_size = block_size
        self.jitter = jitter
        self.slot = block_size + 1 + jitter
        if len(self.tokens) < self.slot:
            raise ValueError(f"{split} split of {path} is shorter than one window ({self.slot})")
        # Set in each worker by seed_worker; made on first use when num_workers=0.
        self.rng: torch.Generator | None = None

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def __len__(self) -> int:
        return len(self.tokens) // self.slot

    def __getstate__(self) -> dict:
        # A spawn or forkserver worker gets the dataset pickled; a torch.Generator does not
        # survive that trip through torch's shared-memory pickler, and each worker makes
        # its own anyway.
        state = self.__dict__.copy()
        state["rng"] = None
        return state

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.rng is None:
            self.rng = torch.Generator().manual_seed(0)
        offset = int(torch.randint(0, self.jitter + 1, (1,), generator=self.rng))
        start = i * self.slot + offset
        window = self.tokens[start : start + self.block_size + 1]
        return window[:-1].clone(), window[1:].clone()

    def decode(self, ids: list[int]) -> str:
        return "".join(self.chars[i] for i in ids)


def seed_worker(worker_id: int) -> None:
    """Give each worker's copy of the dataset its own generator, from the worker's seed
    (the loader's base seed + worker id, so it follows torch.manual_seed in the parent)."""
    info = get_worker_info()
    assert info is not None and info.id == worker_id
    info.dataset.rng = torch.Generator().manual_seed(info.seed % 2**63)


def make_loader(
    dataset: Dataset,
    batch_size: int,
    num_workers: int = 0,
    start_method: str | None = None,
    pin_memory: bool = False,
    shuffle: bool = True,
) -> DataLoader:
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=shuffle,
        drop_last=True,
        num_workers=num_workers,
        pin_memory=pin_memory,
        persistent_workers=num_workers > 0,
        multiprocessing_context=(start_method or None) if num_workers > 0 else None,
        worker_init_fn=seed_worker,
    )
