"""The DataLoader's next() timed with the calls, unprofiled: the profiler's range around it
holds the profiler's cost for each of the dataset's ops (pytorch/examples' VAE on MNIST:
7.68 ms a step profiled, ~3 ms in its program alone), so the worker times it itself."""

from __future__ import annotations

from pathlib import Path

from kernelscope.analysis.data_pipeline import loader_time
from kernelscope.analysis.diagnose import analyze
from kernelscope.analysis.trace_load import load_trace
from kernelscope.engine.targets import load_target, parse_entry
from kernelscope.findings import Code

from support import WORKLOADS
from support.jobs import LauncherDriver, ok

PROGRAM = """import torch
from torch.utils.data import DataLoader, Dataset


class Items(Dataset):
    def __len__(self):
        return 4096

    def __getitem__(self, i):
        x = torch.full((16,), float(i))
        return (x * 2 + 1).relu()


w = torch.randn(192, 192)
for batch in DataLoader(Items(), batch_size=64):
    y = w @ w
    z = (y @ w).sum() + batch.sum()
"""


def test_in_place_the_loaders_share_is_timed_unprofiled(
    driver: LauncherDriver, tmp_path: Path
) -> None:
    (tmp_path / "fed.py").write_text(PROGRAM)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    target = load_target(f"{tmp_path}/fed.py:15")
    entry = parse_entry("fed.py", target, tmp_path, skip=9)
    result = ok(driver.run(f"{tmp_path}/fed.py:15", entry=entry, line_pass=False))
    t = result.finished.sidecar.timing
    assert t.reps == 8
    assert t.loader_us_per_call is not None and t.loader_share is not None
    assert 0 < t.loader_us_per_call < t.us_per_call * 1.5 and 0 < t.loader_share < 1
    # what the loader ran, for KS107's command that profiles it (torch's default_collate is
    # not named)
    assert t.loader_sources == [f"{tmp_path}/fed.py::Items.__getitem__"]
    # the profiler's range holds its cost for each of the dataset's ~256 ops a batch (its
    # share of the step need not grow, the profiled steps' other time grows too: in CI it
    # read 69 % profiled against 70 % unprofiled)
    trace = load_trace(Path(result.finished.trace_path))
    analysis = analyze(trace, sidecar=result.finished.sidecar)
    profiled = loader_time(trace, None, analysis.steps)
    assert profiled is not None and profiled.us_per_step > t.loader_us_per_call
    for f in analysis.findings:
        if f.code == Code.DATA_PIPELINE:
            assert f.evidence["unprofiled"] == 1 and "per step, unprofiled)" in f.message


def test_a_captured_call_that_iterates_a_dataloader_times_its_next(
    driver: LauncherDriver,
) -> None:
    """Batches from two forked workers: next() is mostly the wait for them."""
    side = ok(
        driver.run(f"{WORKLOADS / 'loaders.py'}::forked", timeout=180, warmup=0, line_pass=False)
    ).finished.sidecar
    t = side.timing
    assert t.loader_us_per_call is not None and t.loader_share is not None
    assert 0 < t.loader_us_per_call <= t.us_per_call and 0 < t.loader_share <= 1
