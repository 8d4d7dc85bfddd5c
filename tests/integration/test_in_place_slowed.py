"""In place, the steps before the profiler are the only timing there is: where the host ran
the timing thread slowed for all of them, no fast step shows it (imagenet's loop read 1.53x
and timm's 1.36x once each, docs/tries/*_2026-12-05.md). A reference loop between the timed
steps, at its best, against the host's best says so."""

from __future__ import annotations

from pathlib import Path

from kernelscope.engine.targets import load_target, parse_entry
from kernelscope.render.text import render_report
from kernelscope.report.build import report_for_job

from support.jobs import LauncherDriver, ok

PROGRAM = """import torch
x = torch.randn(64, 64)
for i in range(30):
    y = x @ x
    z = torch.relu(y).sum()
"""


def in_place(driver: LauncherDriver, root: Path, **fields: float):  # type: ignore[no-untyped-def]
    (root / "loop.py").write_text(PROGRAM)
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    target = load_target(f"{root}/loop.py:3")
    entry = parse_entry("loop.py", target, root, skip=9)
    return ok(driver.run(f"{root}/loop.py:3", entry=entry, line_pass=False, fields=fields)), target


def test_a_timing_slowed_throughout_is_said_against_the_hosts_best(
    driver: LauncherDriver, tmp_path: Path
) -> None:
    """A host's best of 1 µs (no host runs the loop that fast): every timed iteration ran
    slowed, all are kept, and the report says by how much."""
    result, target = in_place(driver, tmp_path, host_reference_us=1.0)
    t = result.finished.sidecar.timing
    assert t.reps == 8 and t.reference_us is not None and t.reference_us > 1.3
    assert t.host_reference_us == 1.0
    s = t.slowed
    assert s is not None and (s.share, s.reps, s.left_out) == (1.0, 8, False)
    assert s.factor == t.reference_us / 1.0
    report = report_for_job(result.finished, str(target.path), target.qualname, result.ready)
    text = render_report(report)
    assert "slower throughout the timed iterations" in text, text


def test_the_reference_loops_are_read_and_judged_against_the_launchers_best(
    driver: LauncherDriver, tmp_path: Path
) -> None:
    """No host figure in the request: the launcher sends the best its workers read, and the
    thread's own best comes back (the launcher's next jobs judge by it)."""
    result, _ = in_place(driver, tmp_path)
    t = result.finished.sidecar.timing
    assert t.reference_us is not None and t.reference_us > 0
    assert t.host_reference_us is not None and t.host_reference_us > 0
    assert t.host_reference_us <= min(
        w.ready.reference_us or float("inf")
        for w in (driver.launcher.worker, driver.launcher._timer)  # pyright: ignore[reportPrivateUsage]
        if w is not None and w.ready is not None
    )
