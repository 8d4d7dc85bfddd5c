"""A training loop fed by a DataLoader whose dataset sleeps 0.5 ms per item (4 items a batch)
around a tiny Linear step, profiled raw with torch.profiler: run as a script, it writes the
Chrome trace to the path given. The step is ~0.15 ms; the loader's next() ~2.4 ms."""

import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class SlowDataset(Dataset):
    def __len__(self) -> int:
        return 1000

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(0.0005)
        return torch.full((16,), float(i))


def step(model: torch.nn.Module, batch: torch.Tensor) -> torch.Tensor:
    return model(batch).sum()


def main(out: str) -> None:
    model = torch.nn.Linear(16, 16)
    loader = DataLoader(SlowDataset(), batch_size=4)
    schedule = torch.profiler.schedule(wait=0, warmup=1, active=4, repeat=1)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=schedule,
        with_stack=True,
        on_trace_ready=lambda p: p.export_chrome_trace(out),
    ) as prof:
        for i, batch in enumerate(loader):  # LOADER LINE
            step(model, batch)
            prof.step()
            if i == 5:
                break


if __name__ == "__main__":
    main(sys.argv[1])
