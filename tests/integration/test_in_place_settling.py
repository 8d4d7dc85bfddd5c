"""In place, where --skip is not given, the steps before the profiler go on past the 5th
to 20 timed, then while they still speed up, and the figure is of those that settled: the
steps a program's warm-up slows are not its time (a DDP program's calls 2-5 read 1.70x its
calls past the 50th on an H100, docs/h200-run/fifteenth/README.md), and four calls are too
few to time it (1.32x and 0.89x on an H200, docs/h200-run/seventeenth/README.md). Real
workers, a real program whose first calls sleep longer."""

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

#: Each call 0.9x the one before, from 60 ms: never settled (2.5 ms at the 30th, well above
#: the sleep's floor).
SPEEDING = """import sys
import time

def step(i):
    time.sleep(0.06 * 0.9 ** i)

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
    # calls 2-21 timed (20), settled at once; calls 2-4 (40 ms) left out, 5-21 the figure's
    assert (s.minimum, s.added) == (16, 0)
    assert (s.first, s.left_out, t.reps) == (5, 3, 17)
    assert s.left_out_us is not None and s.left_out_us > 35_000
    assert 4_000 <= t.us_per_call < 15_000
    site = result.finished.sidecar.call_site
    assert site is not None and site.modes[0].startswith("calls 22-")
    report = report_for_job(result.finished, str(target.path), target.qualname, result.ready)
    text = render_report(report)
    assert "calls 2-4 left out, still settling (median " in text, text
    assert "the figure is of calls 5-21" in text, text
    assert "early, while the program may still be warming up" not in text
    assert "fewer than the 20" not in text


def test_a_skip_given_is_kept_as_given(driver: LauncherDriver, tmp_path: Path) -> None:
    """--skip 5: calls 2-5 timed, three of them the 40 ms ones."""
    result, _ = in_place(driver, tmp_path, PROGRAM, 40, 5)
    t = ok(result).finished.sidecar.timing
    assert t.settling is None and t.reps == 4
    assert t.us_per_call > 30_000


def test_calls_still_speeding_up_when_the_program_ends_say_how_to_profile_them(
    driver: LauncherDriver, tmp_path: Path
) -> None:
    """Every call faster than the last: past the 20 timed, the timing goes on until the
    program has made its 30 calls, and the failure names the settling and --skip."""
    result, _ = in_place(driver, tmp_path, SPEEDING, 30, None)
    failure = failed(result)
    assert "16 more to time 20 or 5 s of them and " in failure.message, failure.message
    assert "more while its calls still sped up" in failure.message, failure.message
    assert "needs at least " in failure.message
    assert "--skip 5" in (failure.hint or "") and "still speed up" in (failure.hint or "")


def test_a_program_too_short_for_twenty_timed_calls_says_skip_times_fewer(
    driver: LauncherDriver, tmp_path: Path
) -> None:
    """12 calls: the program ends before 20 are timed; the failure says how many it needs
    and that --skip 5 times four."""
    result, _ = in_place(driver, tmp_path, PROGRAM, 12, None)
    failure = failed(result)
    assert "made 12 calls" in failure.message, failure.message
    assert "needs at least 25 (--skip 5, 16 more to time 20 or 5 s of them, then 4 profiled)" in (
        failure.message
    ), failure.message
    hint = failure.hint or ""
    assert "give --skip 5 to profile from call 6 on (4 timed)" in hint, hint
    assert "speed up" not in hint
