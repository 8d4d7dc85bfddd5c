"""Profiled code that starts DataLoader workers: under fork, spawn and forkserver the job
finishes, the children's ends are their own, and the next job runs on a working worker."""

from __future__ import annotations

import pytest

from support import WORKLOADS
from support.jobs import LauncherDriver, ok


@pytest.mark.parametrize("qualname", ["forked", "spawned", "from_forkserver"])
def test_a_call_that_starts_dataloader_workers_profiles(driver: LauncherDriver, qualname) -> None:
    result = ok(driver.run(f"{WORKLOADS / 'loaders.py'}::{qualname}", timeout=180, warmup=0))
    side = result.finished.sidecar
    assert side.timing.us_per_call > 0
    assert side.lines, "the line pass ran"
    # and the same warm worker takes the next job
    ok(driver.run(f"{WORKLOADS / 'three_lines.py'}::three_lines"))
