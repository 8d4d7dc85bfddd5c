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


def in_place(driver: LauncherDriver, root: Path, caller: str | None = None):  # type: ignore[no-untyped-def]
    (root / "prog.py").write_text(PROGRAM)
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    target = load_target(f"{root}/prog.py::step")
    entry = parse_entry("prog.py", target, root, in_place=True, caller=caller)
    result = ok(driver.run(f"{root}/prog.py::step", entry=entry, line_pass=False))
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
    assert by_line[8].calls + by_line[9].calls == result.finished.sidecar.timing.reps
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
