"""The unprofiled line of the text report: its spread only where the calls say something,
a loop's figure per iteration, and the in-place tracer's cost named."""

from __future__ import annotations

import msgspec

from kernelscope.app.store import RunRecord
from kernelscope.lsp.views import function_summary, hover_markdown, lens_title
from kernelscope.protocol import CallSite, SlowedSpells, ThreadUse
from kernelscope.render.text import render_report
from kernelscope.report.schema import Report
from kernelscope.units import fmt_us

from support import FIXTURES


def unprofiled_line(report: Report) -> str:
    return next(x for x in render_report(report).splitlines() if x.startswith("unprofiled"))


def test_the_spread_needs_five_calls_and_a_loop_reads_per_iteration() -> None:
    report = msgspec.json.decode(
        (FIXTURES / "matmul_add_8192" / "report.json").read_bytes(), type=Report
    )
    t = report.timing
    many = msgspec.structs.replace(t, unprofiled_reps=20, unprofiled_p10_us=1.0,
                                   unprofiled_p90_us=2.0)  # fmt: skip
    line = unprofiled_line(msgspec.structs.replace(report, timing=many))
    assert " per call (median of 20, p10–p90 " in line
    two = msgspec.structs.replace(many, unprofiled_reps=2)
    line = unprofiled_line(msgspec.structs.replace(report, timing=two))
    assert " per call (median of 2, " in line and "p10" not in line
    site = CallSite("train.py", 6, modes=["iterations 6-14 profiled, 10-14 active"],
                    captured=False, step="iteration")  # fmt: skip
    line = unprofiled_line(msgspec.structs.replace(report, timing=many, call_site=site))
    assert " per iteration (median of 20" in line and "sys.settrace" not in line
    traced = msgspec.structs.replace(many, unprofiled_traced="the steps are found by "
                                     "sys.settrace, which slows Python code")  # fmt: skip
    line = unprofiled_line(msgspec.structs.replace(report, timing=traced, call_site=site))
    assert line.endswith("; the steps are found by sys.settrace, which slows Python code "
                         "(Python before 3.12)")  # fmt: skip


def test_calls_the_host_slowed_are_named_under_the_figure() -> None:
    report = msgspec.json.decode(
        (FIXTURES / "matmul_add_8192" / "report.json").read_bytes(), type=Report
    )
    slowed = SlowedSpells(share=0.32, factor=1.7, us_per_call=1020.0, reps=876, left_out=True)
    t = msgspec.structs.replace(report.timing, unprofiled_reps=2738, unprofiled_slowed=slowed)
    lines = render_report(msgspec.structs.replace(report, timing=t)).splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("unprofiled"))
    assert " (median of 1862 of 2738" in lines[at]
    assert lines[at + 1].strip() == (
        "the host ran this thread's CPU 1.7x slower during 32% of the timed calls (their "
        "blocks against the fast ones); those 876 took 1.02 ms (median), left out"
    )
    # the calling thread waited for a CPU 20 % of the timed second: other work held it
    waited = msgspec.structs.replace(
        t,
        unprofiled_window_s=[10.0, 11.0],
        unprofiled_threads=[ThreadUse("python", 0, 0.8, timing=True, wait_s=0.2)],
    )
    lines = render_report(msgspec.structs.replace(report, timing=waited)).splitlines()
    assert (
        lines[at + 1]
        .strip()
        .startswith(
            "other work held this thread's CPU (it waited for one: KS605); it ran 1.7x slower "
            "during 32% of the timed calls"
        )
    )
    kept = msgspec.structs.replace(slowed, left_out=False)
    t = msgspec.structs.replace(t, unprofiled_slowed=kept)
    text = render_report(msgspec.structs.replace(report, timing=t))
    assert " (median of 2738" in text and "kept in: most calls ran slowed" in text
    faster = msgspec.structs.replace(slowed, left_out=False, kept_because="not slower")
    t = msgspec.structs.replace(t, unprofiled_slowed=faster)
    text = render_report(msgspec.structs.replace(report, timing=t))
    assert "(median), kept in: they ran no slower than the rest" in text
    throughout = SlowedSpells(share=1.0, factor=1.5, us_per_call=1020.0, reps=4, left_out=False,
                              kept_because="most slowed")  # fmt: skip
    t = msgspec.structs.replace(t, unprofiled_reps=4, unprofiled_slowed=throughout)
    lines = render_report(msgspec.structs.replace(report, timing=t)).splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("unprofiled"))
    assert lines[at + 1].strip() == (
        "the host ran this thread's CPU 1.5x slower throughout the timed calls (a reference "
        "loop between them at its best, against the host's best): the figure reads high by "
        "up to that much"
    )
    slow = msgspec.structs.replace(report, timing=t)
    said = (f"{fmt_us(t.unprofiled_us_per_call)} per call unprofiled (the host ran its thread "
            "1.5x slower throughout: reads high)")  # fmt: skip
    assert said in function_summary(slow)
    record = RunRecord("r1", "train.py", "train_step", "now", "", slow)
    assert said in hover_markdown(record, line=report.function.line)
    cpu = msgspec.structs.replace(slow.device, type="cpu")
    lens = lens_title(
        msgspec.structs.replace(record, report=msgspec.structs.replace(slow, device=cpu))
    )
    assert lens.startswith(f"{fmt_us(t.unprofiled_us_per_call)}/call (host slowed 1.5x) ·")
    t = msgspec.structs.replace(t, unprofiled_slowed=slowed)  # some blocks, left out: no clause
    assert "throughout" not in function_summary(msgspec.structs.replace(report, timing=t))


def test_lines_that_sum_past_the_unprofiled_call_say_the_profiler_is_in_them() -> None:
    """time_sequence_prediction (pytorch/examples) on the CPU: two LSTM-cell lines read 769
    and 835 ms a call from the traced pass, the call 546 ms unprofiled."""
    report = msgspec.json.decode(
        (FIXTURES / "matmul_add_8192" / "report.json").read_bytes(), type=Report
    )
    line = report.lines[0]
    cells = [
        msgspec.structs.replace(line, self_cpu_us=769e3, line=26),
        msgspec.structs.replace(line, self_cpu_us=835e3, line=27),
    ]
    t = msgspec.structs.replace(report.timing, unprofiled_us_per_call=546e3)
    text = render_report(msgspec.structs.replace(report, timing=t, lines=cells))
    assert ("these lines' self CPU sums to 1.60 s per call, 2.9x the call's 546.00 ms "
            "unprofiled: the profiler's cost per op is in each") in text  # fmt: skip
    # the editor's hover on such a line says it too
    inflated = msgspec.structs.replace(report, timing=t, lines=cells)
    record = RunRecord("r1", line.path, report.function.qualname, "now", "", inflated)
    hover = hover_markdown(record, line=26)
    assert "**line 26:**" in hover and "769.00 ms CPU self" in hover
    assert "*These lines' self CPU sums to 1.60 s per call, 2.9x the call's 546.00 ms" in hover
    quick = msgspec.structs.replace(t, unprofiled_us_per_call=1.2e6)
    text = render_report(msgspec.structs.replace(report, timing=quick, lines=cells))
    assert "these lines' self CPU" not in text
    record = msgspec.structs.replace(record, report=msgspec.structs.replace(inflated, timing=quick))
    assert "self CPU sums" not in hover_markdown(record, line=26)


def test_few_calls_timed_in_place_say_how_to_time_more() -> None:
    """In place the program's calls 2 to --skip are timed (4 by default): fewer than the 20
    a captured call's timing takes, and the report says how to take 20, and what the
    program must then make (its profiled steps too; a loop one more)."""
    report = msgspec.json.decode(
        (FIXTURES / "matmul_add_8192" / "report.json").read_bytes(), type=Report
    )
    steps = report.steps
    profiled = steps.wait + steps.warmup + steps.active
    four = msgspec.structs.replace(report.timing, unprofiled_reps=4)
    calls = CallSite("train.py", 6, captured=False, step="call")
    lines = render_report(
        msgspec.structs.replace(report, timing=four, call_site=calls)
    ).splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("unprofiled"))
    assert lines[at + 1].strip() == (
        "4 calls timed (the program's calls 2-5), fewer than the 20 a captured call's timing "
        "takes, and early, while the program may still be warming up: --skip 21 times 20, "
        f"where the program makes at least {21 + profiled} calls"
    )
    loop = msgspec.structs.replace(calls, step="iteration")
    text = render_report(msgspec.structs.replace(report, timing=four, call_site=loop))
    assert f"where the program makes at least {21 + profiled} iterations" in text
    cold = next(x for x in text.splitlines() if x.startswith("cold call"))
    assert cold.endswith("the loop's first iteration, with what the program runs in it alone "
                         "(an eval or a log at iteration 0)")  # fmt: skip
    text = render_report(msgspec.structs.replace(report, timing=four, call_site=calls))
    assert "the loop's first iteration" not in text
    one = msgspec.structs.replace(four, unprofiled_reps=1)
    text = render_report(msgspec.structs.replace(report, timing=one, call_site=calls))
    assert "1 call timed (the program's call 2), fewer than the 20" in text
    # --skip 1: no figure (the worker sends 0, "none"), and nothing compared with it
    none = msgspec.structs.replace(
        four, unprofiled_reps=0, unprofiled_us_per_call=0.0, unprofiled_method="none"
    )
    text = render_report(msgspec.structs.replace(report, timing=none, call_site=calls))
    assert "unprofiled  none: no call timed without the profiler\n" in text
    assert "--skip 1 times none (the cold call below is the first call), fewer" in text
    assert "median of" not in text and "profiler adds" not in text
    record = RunRecord("r1", "train.py", "train_step", "now", "",
                       msgspec.structs.replace(report, timing=none, call_site=calls))  # fmt: skip
    assert "not timed unprofiled" in hover_markdown(record, line=report.function.line)
    cpu = msgspec.structs.replace(report.device, type="cpu")
    on_cpu = msgspec.structs.replace(record.report, device=cpu)
    lens = lens_title(msgspec.structs.replace(record, report=on_cpu))
    assert lens.startswith(f"{fmt_us(report.timing.cpu_us_per_step)} CPU/step profiled ·")
    enough = msgspec.structs.replace(four, unprofiled_reps=20)
    captured = msgspec.structs.replace(calls, captured=True)
    for timing, site in ((enough, calls), (four, captured), (four, None)):
        text = render_report(msgspec.structs.replace(report, timing=timing, call_site=site))
        assert "timed (the program's" not in text
