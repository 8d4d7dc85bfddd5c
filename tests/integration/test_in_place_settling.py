"""In place, where --skip is not given, the steps before the profiler go on past the 5th
while they still speed up, and the figure is of those that settled: the steps a program's
warm-up slows are not its time (a DDP program's calls 2-5 read 1.70x its calls past the 50th
on an H100, docs/h200-run/fifteenth/README.md). Real workers, a real program whose first
calls sleep longer."""

from __future__ import annotations

from pathlib import Path

from kernelscope.engine.targets import load_target, parse_entry
from kernelscope.render.text import render_report
from kernelscope.report.build import report_for_job

from support.jobs import LauncherDriver, failed, ok

#: Calls 2-4 take 40 ms (a warm-up), the rest 4 ms; `CALLS` calls in all.
PROGRAM = """import sys
import time

def step(i):
    time.sleep(0.04 if i <= 4 else 0.004)

for i in range(1, int(sys.argv[1]) + 1):
    step(i)
"""

#: Each call 0.7x the one before, from 60 ms: never settled.
SPEEDING = """import sys
import time

def step(i):
    time.sleep(0.06 * 0.7 ** i)

for i in range(1, int(sys.argv[1]) + 1):
    step(i)
"""


def in_place(driver: LauncherDriver, root: Path, program: str, calls: int, skip: int | None):  # type: ignore[no-untyped-def]
    (root / "prog.py").write_text(program)
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    target = load_target(f"{root}/prog.py::step")
    entry = parse_entry(f"prog.py {calls}", target, root, in_place=True, skip=skip)
    return driver.run(f"{root}/prog.py::step", entry=entry, line_pass=False), target


def test_the_warm_up_calls_are_left_out_and_the_figure_is_of_the_settled_ones(
    driver: LauncherDriver, tmp_path: Path
) -> None:
    result, target = in_place(driver, tmp_path, PROGRAM, 40, None)
    result = ok(result)
    t = result.finished.sidecar.timing
    s = t.settling
    assert s is not None and s.steady
    # calls 2-4 (40 ms) left out; call 5 on are the figure's
    assert (s.first, s.left_out) == (5, 3)
    assert s.left_out_us is not None and s.left_out_us > 35_000
    assert s.added >= 2 and t.reps >= 3
    assert 4_000 <= t.us_per_call < 15_000
    site = result.finished.sidecar.call_site
    assert site is not None and site.modes[0].startswith(f"calls {6 + s.added}-")
    report = report_for_job(result.finished, str(target.path), target.qualname, result.ready)
    text = render_report(report)
    assert "calls 2-4 left out, still settling (median " in text, text
    assert f"the figure is of calls 5-{4 + t.reps}" in text, text
    assert "early, while the program may still be warming up" not in text


def test_a_skip_given_is_kept_as_given(driver: LauncherDriver, tmp_path: Path) -> None:
    """--skip 5: calls 2-5 timed, three of them the 40 ms ones."""
    result, _ = in_place(driver, tmp_path, PROGRAM, 40, 5)
    t = ok(result).finished.sidecar.timing
    assert t.settling is None and t.reps == 4
    assert t.us_per_call > 30_000


def test_calls_still_speeding_up_when_the_program_ends_say_how_to_profile_them(
    driver: LauncherDriver, tmp_path: Path
) -> None:
    """Every call faster than the last: the timing goes on until the program has made its
    12 calls, and the failure names the settling and --skip."""
    result, _ = in_place(driver, tmp_path, SPEEDING, 12, None)
    failure = failed(result)
    assert "more timed while its calls still sped up" in failure.message, failure.message
    assert "needs at least " in failure.message
    assert "--skip 5" in (failure.hint or ""), failure.hint
