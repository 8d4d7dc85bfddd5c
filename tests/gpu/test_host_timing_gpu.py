"""Host-bound unprofiled times agree with fresh processes (issue 24, item 5): on the H200
the worker that never profiles read 29-54 % above fresh processes on these four patterns.
Each is timed by the launcher, then in five fresh processes that warm up and time as the
worker does (tests/support/fresh_timing.py, the same count of calls); the worker's figure
must be within 10 % of their median. That host runs a thread's CPU ~1.7x slower in spells
of 0.2-2 s (docs/h200-run/fourth/clocks.txt); the worker and the fresh processes alike
leave the calls of such spells out, found by a pure-Python loop timed in the same thread,
and each process's share of them is printed."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from typing import Any

import msgspec
import pytest

from support import REPO_ROOT
from support.gpu import NEEDS_GPU
from support.jobs import LauncherDriver, ok

pytestmark = NEEDS_GPU
WORKLOAD = f"{REPO_ROOT}/fixtures/workloads/host_timing.py"
FRESH = REPO_ROOT / "tests" / "support" / "fresh_timing.py"
FRESH_PROCESSES = 5


def fresh(spec: str, reps: int) -> dict[str, Any]:
    """One fresh process's figure over `reps` calls (fresh_timing.py's output)."""
    env = {**os.environ, "PYTHONPATH": f"{REPO_ROOT / 'server'}"}
    done = subprocess.run(
        [sys.executable, str(FRESH), spec, "cuda", str(reps)],
        capture_output=True, text=True, check=True, env=env,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def slowed(s: dict[str, Any] | None) -> str:
    """A process's slowed calls (UnprofiledTiming.slowed as JSON), in a few words."""
    if s is None:
        return "none slowed"
    return f"{s['share']:.0%} slowed {s['factor']:.1f}x{'' if s['left_out'] else ', kept in'}"


@pytest.mark.parametrize("qualname", ["churn", "graph_break", "checkpointed", "loader_step"])
def test_unprofiled_time_is_within_ten_percent_of_fresh_processes(
    driver: LauncherDriver, qualname: str
) -> None:
    spec = f"{WORKLOAD}::{qualname}"
    timing = ok(
        driver.run(spec, device="cuda", line_pass=False, timeout=300)
    ).finished.sidecar.timing
    runs = [fresh(spec, timing.reps) for _ in range(FRESH_PROCESSES)]
    ratio = timing.us_per_call / statistics.median(r["us_per_call"] for r in runs)
    mine = f"{slowed(msgspec.to_builtins(timing.slowed))}, loop {timing.reference_us:.1f} µs"
    each = "; ".join(
        f"{r['us_per_call']:.1f} ({slowed(r['slowed'])}, loop {r['reference_us']:.1f} µs)"
        for r in runs
    )
    print(f"{qualname}: {timing.process} {timing.us_per_call:.1f} µs ({timing.reps} calls in "
          f"{timing.window_s[1] - timing.window_s[0]:.2f} s, {mine}), fresh "
          f"{each} µs; ratio {ratio:.3f}")  # fmt: skip
    assert timing.reps >= 20 or timing.reps * timing.us_per_call >= 4.5e6
    assert abs(ratio - 1) <= 0.10
