"""The unprofiled timing says when it ran (``window_s``, the host's monotonic clock), and
the host-speed probe beside a job has blocks inside that window: how the H200 test reads
each figure against the host's speed at its time (tests/gpu/test_host_timing_gpu.py,
tests/support/beside.py)."""

from __future__ import annotations

import time

from support import REPO_ROOT
from support.beside import probe_beside
from support.jobs import LauncherDriver, ok

SPEC = f"{REPO_ROOT}/fixtures/workloads/host_timing.py::churn"
#: Few enough calls that every one's time comes back (``samples_us`` keeps the first 200).
REPS = 60


def test_the_clean_workers_timing_window_lines_up_with_the_probe_beside_it(
    driver: LauncherDriver,
) -> None:
    driver.launcher.clean_timing = "always"
    try:
        with probe_beside() as probe:
            before = time.monotonic()
            side = ok(
                driver.run(SPEC, line_pass=False, fields={"timing_reps": REPS})
            ).finished.sidecar
            after = time.monotonic()
    finally:
        driver.launcher.clean_timing = "auto"
    t = side.timing
    assert t.process == "clean worker"
    start, end = t.window_s
    assert before < start < end < after
    # the calls ran back to back inside the window: their sum fills most of it. Their sum,
    # not reps x median: beside the probe on 2 CPUs churn's calls read 0.3-95 ms, and
    # 155 x the 1.5 ms median was 7 % of the 3.5 s their sum filled (CI, 2026-12-03).
    assert t.reps == REPS == len(t.samples_us)
    assert 0.5 * (end - start) <= sum(t.samples_us) / 1e6 <= end - start
    assert probe.within(t.window_s) and probe.level(t.window_s) > 0
    assert probe.blocks[0][0] < start and probe.blocks[-1][0] > end  # it ran all through
