"""In place, the rule that times more steps while a program's steps still speed up
(inplace.settled), and how the report says which steps were left out."""

from __future__ import annotations

import msgspec

from kernelscope.protocol import CallSite, Settling
from kernelscope.render.text import render_report
from kernelscope.report.schema import Report
from kernelscope.worker.program.inplace import by_line, leading_warm_up, settle_window, settled

from support import FIXTURES


def test_a_step_much_faster_than_those_before_it_is_not_settled() -> None:
    assert settled([40.0, 40.0, 40.0]) is None  # too few to judge
    assert settled([40.0, 40.0, 40.0, 4.0]) is False  # the warm-up ended at the last
    assert settled([40.0, 40.0, 40.0, 4.0, 4.0]) is False  # the window is still mostly slow
    assert settled([40.0, 40.0, 40.0, 4.0, 4.0, 4.0]) is True
    assert settled([10.0, 11.0, 9.5, 9.0]) is True  # noise within 15 %
    assert settled([10.0, 10.0, 10.0, 30.0]) is True  # slower (a spike, an eval): goes on
    assert settled([10.0, 30.0, 10.0, 9.0]) is True  # the median, not a spike, is weighed


def test_calls_from_lines_of_different_costs_are_weighed_by_their_line() -> None:
    """A 2 ms call after 8 ms ones is not a step that sped up: each over its line's median,
    the series is flat and settled; one line's samples are left as they are."""
    sites = [("a.py", 9), ("a.py", 8)] * 5
    samples = [8_000.0, 2_000.0] * 5
    assert settled(samples) is False  # read as one series, the last "sped up"
    assert by_line(samples, sites) == [1.0] * 10
    assert settled(by_line(samples, sites)) is True
    assert by_line([3.0, 4.0], [None, None]) == [3.0, 4.0]


def test_the_window_is_half_the_steps_before_from_3_to_10() -> None:
    assert [settle_window(n) for n in (3, 6, 8, 20, 60)] == [3, 3, 4, 10, 10]


def report_with(settling: Settling | None, reps: int) -> str:
    report = msgspec.json.decode(
        (FIXTURES / "matmul_add_8192" / "report.json").read_bytes(), type=Report
    )
    site = CallSite("train.py", 9, modes=["calls 9-17 profiled, 13-17 active"], captured=False)
    t = msgspec.structs.replace(
        report.timing, unprofiled_reps=reps, unprofiled_us_per_call=4000.0,
        unprofiled_settling=settling,
    )  # fmt: skip
    return render_report(msgspec.structs.replace(report, timing=t, call_site=site))


def test_the_report_names_the_calls_left_out_and_those_kept() -> None:
    s = Settling(first=5, left_out=3, left_out_us=40_000.0, steady=True, added=0, minimum=16)
    text = report_with(s, 17)
    assert (
        "calls 2-4 left out, still settling (median 40.00 ms, 10.00x the figure): the figure "
        "is of calls 5-21"
    ) in text, text
    assert "may still be warming up" not in text and "still speeding up" not in text
    # the 20 a timing of its own takes were timed: no line asks for more
    assert "fewer than the 20" not in text


def test_calls_still_speeding_up_at_the_end_are_said_so() -> None:
    s = Settling(first=54, left_out=52, left_out_us=9_000.0, steady=False, added=45, minimum=16)
    text = report_with(s, 11)
    assert (
        "still speeding up at call 64 (after 45 more timed, at most 45 or 10 s of them): the "
        "figure may be of calls still settling; --skip N times from call N+1"
    ) in text, text
    long = Settling(first=2, left_out=0, left_out_us=None, steady=False, added=0, minimum=2)
    text = report_with(long, 4)
    assert "still speeding up at call 5 (calls this long get no more)" in text, text
    assert "left out" not in text and "fewer than the 20" not in text


def test_with_skip_given_few_timed_calls_are_said_early() -> None:
    """--skip 5 (no settling judged): calls 2-5 timed, and the report says how to time 20."""
    text = report_with(None, 4)
    assert (
        "4 calls timed (the program's calls 2-5), fewer than the 20 a captured call's timing "
        "takes, and early, while the program may still be warming up: --skip 21 times 20"
    ) in text, text


def test_a_warm_up_of_several_steps_is_left_out_whole() -> None:
    """k warm-up steps of 40 ms before 4 ms ones: all k, however many (a rule that stops at
    the first step not over the p90 of the rest kept them all from k = 4 on)."""
    for k in (1, 3, 4, 8, 12):
        assert leading_warm_up([40.0] * k + [4.0] * (20 - k), extended=False) == k, k
    # steady steps that vary ±30 %: none is a warm-up
    steady = [1.0, 1.3, 0.7, 1.2, 0.8, 1.25, 0.75, 1.1, 0.9, 1.0] * 2
    assert leading_warm_up([1.3, *steady], extended=False) == 0
    # after more were timed while they sped up, the median of the rest is the bar
    assert leading_warm_up([1.3, 1.0, 1.0, 1.0], extended=True) == 1
    assert leading_warm_up([5.0, 1.0], extended=False) == 0  # too few to judge


def test_a_warm_up_over_a_lines_first_calls_stays_slower_than_its_steady_ones() -> None:
    """Two lines, 8 and 2 ms, both 10x slower for their first six calls: each call is
    weighed against its line's later calls, so the warm-up still stands out."""
    sites = [("a.py", 8), ("a.py", 9)] * 12
    samples = [80.0, 20.0] * 3 + [8.0, 2.0] * 9
    series = by_line(samples, sites)
    assert series[:6] == [10.0] * 6 and series[6:] == [1.0] * 18
    assert leading_warm_up(series, extended=False) == 6
    assert by_line([8.0, 2.0, 8.0], [("a.py", 8), ("a.py", 9)]) == [1.0, 1.0, 1.0]
