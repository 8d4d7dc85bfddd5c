"""In place, a function the program calls from several lines (a GAN's discriminator, on the
real and on the fake batch): the report names each line with its calls and their median,
and --from profiles one line's. Real workers, a real program."""

from __future__ import annotations

from pathlib import Path

from kernelscope.engine.targets import load_target, parse_entry
from kernelscope.render.text import render_report
from kernelscope.report.build import report_for_job

from support.jobs import LauncherDriver, ok

#: `step` from two lines of the loop: 2 ms from line 8, 8 ms from line 9.
PROGRAM = """import time

def step(seconds):
    time.sleep(seconds)

def main():
    for _ in range(40):
        step(0.002)
        step(0.008)

main()
"""


#: `Inner.step`, called by `Outer.step` (a function of the same name in the same file, as
#: one ``forward`` calls another) from two lines: 2 ms from line 9, 8 ms from line 10.
NESTED = """import time

class Inner:
    def step(self, seconds):
        time.sleep(seconds)

class Outer:
    def step(self, inner):
        inner.step(0.002)
        inner.step(0.008)

inner, outer = Inner(), Outer()
for _ in range(40):
    outer.step(inner)
"""


def in_place(  # type: ignore[no-untyped-def]
    driver: LauncherDriver,
    root: Path,
    caller: str | None = None,
    program: str = PROGRAM,
    qualname: str = "step",
):
    (root / "prog.py").write_text(program)
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    target = load_target(f"{root}/prog.py::{qualname}")
    entry = parse_entry("prog.py", target, root, in_place=True, caller=caller)
    result = ok(driver.run(f"{root}/prog.py::{qualname}", entry=entry, line_pass=False))
    return result, target


def test_calls_from_two_lines_are_named_with_their_medians(
    driver: LauncherDriver, tmp_path: Path
) -> None:
    result, target = in_place(driver, tmp_path)
    site = result.finished.sidecar.call_site
    assert site is not None
    by_line = {s.line: s for s in site.sites}
    assert set(by_line) == {8, 9}, site.sites
    assert all(s.path.endswith("prog.py") for s in site.sites)
    t = result.finished.sidecar.timing
    assert by_line[8].calls + by_line[9].calls == t.reps
    # a 2 ms call after 8 ms ones is not the program speeding up: nothing more timed, and
    # at most a slow first call or two left out (a busy host's), where the line-blind rule
    # left out 11 of the 21
    assert t.settling is not None and t.settling.added == 0
    assert t.settling.left_out <= 2 and t.reps >= 18, t.settling
    assert 1_900 < by_line[8].median_us < 5_000, by_line
    assert 7_900 < by_line[9].median_us < 12_000, by_line
    report = report_for_job(result.finished, str(target.path), target.qualname, result.ready)
    text = render_report(report)
    assert "the timed calls came from 2 lines: " in text, text
    assert "prog.py:8 (" in text and "prog.py:9 (" in text
    assert "the figure is their median: --from " in text


def test_from_one_line_names_no_lines(driver: LauncherDriver, tmp_path: Path) -> None:
    result, _ = in_place(driver, tmp_path, caller="prog.py:9")
    side = result.finished.sidecar
    assert side.call_site is not None and side.call_site.sites == []
    assert 7_900 < side.timing.us_per_call < 12_000


def test_a_function_called_by_another_of_its_name_names_the_callers_lines(
    driver: LauncherDriver, tmp_path: Path
) -> None:
    """Outer.step's lines, not the loop's: the other ``step`` is the user's code too."""
    result, _ = in_place(driver, tmp_path, program=NESTED, qualname="Inner.step")
    site = result.finished.sidecar.call_site
    assert site is not None
    assert sorted(s.line for s in site.sites) == [9, 10], site.sites
