"""A real CPU call that faults 64 MiB of pages in each time (tests/workloads/host_churn.py):
the worker reads its page faults and system time over the timed calls, and KS133 names them
with what keeps the memory; with glibc's thresholds raised in the environment the same call
faults nothing and the finding goes (3.9x faster here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from support import WORKLOADS

SPEC = f"{WORKLOADS}/host_churn.py::churn_step"


def profile(**env: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "kernelscope", "profile", SPEC, "--device", "cpu", "--no-lines",
         "--no-memory", "--json"],
        capture_output=True, text=True, check=False, timeout=240, env={**os.environ, **env},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_a_call_that_faults_its_memory_in_each_time_is_named() -> None:
    churned = profile()
    t = churned["timing"]
    assert t["unprofiled_minor_faults_per_call"] >= 16_000  # 16,384 pages of 4 KiB
    assert t["unprofiled_system_us_per_call"] > 0
    (finding,) = [f for f in churned["findings"] if f["code"] == "KS133"]
    assert finding["message"].startswith("the host's allocator gives memory back to the OS")
    assert any("MALLOC_TRIM_THRESHOLD_" in t for t in finding["try"])
    kept = profile(MALLOC_MMAP_THRESHOLD_="4000000000", MALLOC_TRIM_THRESHOLD_="4000000000")
    assert kept["timing"]["unprofiled_minor_faults_per_call"] < 1000  # the heap growing once
    assert not [f for f in kept["findings"] if f["code"] == "KS133"]
    assert kept["timing"]["unprofiled_us_per_call"] < t["unprofiled_us_per_call"]
