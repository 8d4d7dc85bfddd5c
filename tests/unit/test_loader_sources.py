"""loader_clock.sources_of: what a DataLoader iterator's batches run, for KS107's command
that profiles it: the dataset's __getitem__ (an IterableDataset's __iter__), through torch's
Subset and ConcatDataset, and a collate_fn of the user's; nothing of torch's own, and no
lambda (no command can name one)."""

from __future__ import annotations

from typing import Any

from torch.utils.data import ConcatDataset, DataLoader, Dataset, IterableDataset, Subset

from kernelscope.worker.program.loader_clock import sources_of

HERE = __file__


class Stream(IterableDataset[int]):
    def __iter__(self) -> Any:
        yield from range(8)


class Items(Dataset[int]):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> int:
        return i


def collate(batch: list[int]) -> list[int]:
    return batch


def test_the_datasets_item_through_torchs_wrappers_and_the_users_collate() -> None:
    wrapped = Subset(ConcatDataset([Items(), Items()]), [0, 1, 2])
    it = iter(DataLoader(wrapped, batch_size=2, collate_fn=collate))
    assert sources_of(it) == [f"{HERE}::Items.__getitem__", f"{HERE}::collate"]


def test_an_iterable_datasets_iter_and_nothing_of_torchs() -> None:
    assert sources_of(iter(DataLoader(Stream(), batch_size=2))) == [f"{HERE}::Stream.__iter__"]
    lam = iter(DataLoader(Items(), batch_size=2, collate_fn=lambda b: b))  # pyright: ignore[reportUnknownLambdaType, reportUnknownArgumentType]
    assert sources_of(lam) == [f"{HERE}::Items.__getitem__"]
