"""The unprofiled timing says when it ran (``window_s``, the host's monotonic clock), and a
fresh process streaming the same call beside the job has calls inside that window: how the
H200 test takes its truth (tests/gpu/test_host_timing_gpu.py; tests/support/beside.py)."""

from __future__ import annotations

import time

from support import REPO_ROOT
from support.beside import fresh_beside
from support.jobs import LauncherDriver, ok

SPEC = f"{REPO_ROOT}/fixtures/workloads/host_timing.py::churn"


def test_the_clean_workers_timing_window_lines_up_with_fresh_calls_beside_it(
    driver: LauncherDriver,
) -> None:
    driver.launcher.clean_timing = "always"
    try:
        with fresh_beside(SPEC, "cpu", 1) as beside:
            before = time.monotonic()
            side = ok(driver.run(SPEC, line_pass=False)).finished.sidecar
            after = time.monotonic()
    finally:
        driver.launcher.clean_timing = "auto"
    t = side.timing
    assert t.process == "clean worker"
    start, end = t.window_s
    assert before < start < end < after
    # the calls ran back to back inside the window: their sum fills most of it
    assert 0.5 * (end - start) <= t.reps * t.us_per_call / 1e6 <= 1.5 * (end - start)
    (inside,) = beside.within(t.window_s)
    assert inside and beside.median(t.window_s) > 0
    (calls,) = beside.samples
    assert calls[0][0] < start and calls[-1][0] > end  # it streamed all through the window
