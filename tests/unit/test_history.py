"""Every run against the last: the comparison of two recorded H200 runs and what the editor
shows for a run slower than the one before it (the CLI: tests/integration/test_diff_cli.py)."""

from __future__ import annotations

import msgspec
import pytest
from lsprotocol import types as lsp

from kernelscope.app.history import Delta
from kernelscope.app.store import RunRecord
from kernelscope.lsp import views
from kernelscope.render.compare import change_text, render_comparison
from kernelscope.render.text import render_report
from kernelscope.report.compare import compare
from kernelscope.report.schema import Report
from kernelscope.units import fmt_us

from support import FIXTURES


def fixture_report(name: str) -> Report:
    return msgspec.json.decode((FIXTURES / name / "report.json").read_bytes(), type=Report)


def test_a_run_against_itself_is_no_change() -> None:
    r = fixture_report("matmul_add_8192")
    c = compare(r, r)
    assert c.change == 0 and not c.regression and not c.improvement
    assert c.ops == [] and c.lines == []


def test_the_same_function_on_a_bigger_input_is_a_regression_beyond_the_noise() -> None:
    small, big = fixture_report("matmul_add_64"), fixture_report("matmul_add_8192")
    c = compare(small, big, "n=64", "n=8192")
    assert c.unit == "CUDA" and c.timed == "unprofiled per call"
    assert c.regression and c.change > 10  # 39 µs → 1.58 ms: far beyond any noise
    assert c.time_before_us == small.timing.unprofiled_us_per_call
    top = c.ops[0]
    assert top.delta_us > 0 and top.calls_before == top.calls_after
    back = compare(big, small)
    assert back.improvement and not back.regression
    assert change_text(c).startswith(f"{c.change:+.0%} (")
    assert "regression beyond the noise" in change_text(c)


def test_the_editor_flags_a_regression_on_the_def_line() -> None:
    small, big = fixture_report("matmul_add_64"), fixture_report("matmul_add_8192")
    record = RunRecord(
        "b" * 12, big.function.path, big.function.qualname, "2026-12-01T10:02:11+00:00", "h", big
    )
    c = compare(small, big, "run aaaaaaaa (10:01:00)", "run bbbbbbbb (10:02:11)")
    delta = Delta(c, f"{c.change:+.0%} vs 10:01:00", change_text(c), "aten::mm +1 ms per step")
    lines = ["x"] * 40
    diags = views.run_diagnostics(record, big.function.path, lines, views.ViewOptions(), delta)
    (slower,) = [d for d in diags if d.code == "KS802"]
    assert slower.severity == lsp.DiagnosticSeverity.Warning
    assert slower.range.start.line == big.function.line - 1
    assert "slower than run aaaaaaaa" in slower.message and "aten::mm" in slower.message
    assert views.lens_title(record, delta).endswith("vs 10:01:00")
    faster = compare(big, small)
    quiet = Delta(faster, "", change_text(faster), "")
    assert not [
        d
        for d in views.run_diagnostics(record, big.function.path, lines, views.ViewOptions(), quiet)
        if d.code == "KS802"
    ]


def test_an_op_changed_only_beyond_its_noise_and_the_diff_says_what_that_is() -> None:
    a = fixture_report("matmul_add_8192")
    t = a.timing
    spread = msgspec.structs.replace(
        t,
        unprofiled_p10_us=t.unprofiled_us_per_call * 0.96,
        unprofiled_p90_us=t.unprofiled_us_per_call * 1.04,
    )
    a = msgspec.structs.replace(a, timing=spread)
    # the same code again: +3 % per call, every op 2-4 % slower (beyond 0.5 µs each)
    b = msgspec.structs.replace(
        a,
        timing=msgspec.structs.replace(
            spread, unprofiled_us_per_call=t.unprofiled_us_per_call * 1.03
        ),
        ops=[
            msgspec.structs.replace(
                o, self_cuda_us=o.self_cuda_us * 1.03, self_cpu_us=o.self_cpu_us * 1.04
            )
            for o in a.ops
        ],
    )
    c = compare(a, b)
    assert "within the noise" in change_text(c)
    assert c.ops == []  # none beyond its noise
    assert c.op_noise == pytest.approx(0.05) and c.ops_within_noise >= 1
    text = render_comparison(c)
    assert "changed" not in text.split("no op changed")[0]
    assert "±5% of its time per step, at least 0.5 µs" in text
    # one op 30 % slower, another called twice as often: those two, and only those, changed
    mm, add = b.ops[0], b.ops[1]
    assert (mm.name, add.name) == ("aten::mm", "aten::add")
    worse = msgspec.structs.replace(
        b,
        ops=[
            msgspec.structs.replace(mm, self_cuda_us=mm.self_cuda_us * 1.3),
            msgspec.structs.replace(add, calls=add.calls * 2),
            *b.ops[2:],
        ],
    )
    c = compare(a, worse)
    assert [(d.name, d.status) for d in c.ops] == [
        ("aten::mm", "changed"),
        ("aten::add", "changed"),
    ]
    assert c.ops[0].noise_us == pytest.approx(0.05 * c.ops[0].after_us)
    text = render_comparison(c)
    assert "its time beyond its noise: ±5%" in text


def test_a_lines_hover_says_when_most_of_its_traced_time_was_the_tracers() -> None:
    report = fixture_report("matmul_add_64")
    row = msgspec.structs.replace(report.lines[0], self_cpu_us=10.0, tracer_us=600.0)
    assert "the line tracer's own 600.0 µs taken out" in views.line_summary(report, row)
    row = msgspec.structs.replace(row, tracer_us=1.0)
    assert "tracer" not in views.line_summary(report, row)


def test_a_line_whose_own_time_is_lost_in_the_tracers_says_under_how_much() -> None:
    """A comprehension's 40 µs left over 11 ms of tracer cost taken out is within the
    correction's noise (5 % of it, 550 µs): the hover and the table say "under", not 40 µs."""
    report = fixture_report("matmul_add_64")
    row = msgspec.structs.replace(
        report.lines[0], self_cpu_us=40.0, tracer_us=11_000.0, tracer_noise_us=550.0
    )
    assert row.below_noise
    assert views.line_summary(report, row).startswith(
        f"{fmt_us(row.cuda_us)} CUDA · under 550.0 µs CPU self (lost in the line tracer's"
    )
    table = render_report(msgspec.structs.replace(report, lines=[row]))
    assert "< 550.0 µs" in table and " 40.0 µs" not in table
    clear = msgspec.structs.replace(row, self_cpu_us=900.0)
    assert not clear.below_noise and "900.0 µs CPU self" in views.line_summary(report, clear)
