"""The worker's line attribution over hand-built line-pass events (the worker program run
as a module, without starting it)."""

from __future__ import annotations

from typing import Any

import pytest

from support.worker import worker_namespace


@pytest.fixture(scope="module")
def worker() -> dict[str, Any]:
    return worker_namespace()


def _span(cat: str, name: str, tid: int, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def test_backward_on_the_autograd_thread_belongs_to_the_line_that_called_it(worker) -> None:
    keys = [("/p/step.py", 3), ("/p/step.py", 4)]
    events = [
        _span("user_annotation", "ks:line:0", 10, 0.0, 50.0),  # out = model(x)
        _span("cpu_op", "aten::mm", 10, 5.0, 10.0),
        _span("cuda_runtime", "cudaLaunchKernel", 10, 6.0, 3.0, correlation=1),
        _span("kernel", "gemm_fwd", 0, 20.0, 40.0, correlation=1),
        _span("user_annotation", "ks:line:1", 10, 60.0, 200.0),  # loss.backward()
        _span("cpu_op", "autograd::engine::evaluate_function: MmBackward0", 77, 70.0, 50.0),
        _span("cpu_op", "aten::mm", 77, 72.0, 20.0),
        _span("cuda_runtime", "cudaLaunchKernel", 77, 75.0, 3.0, correlation=2),
        _span("cuda_runtime", "cudaLaunchKernel", 77, 95.0, 3.0, correlation=3),
        _span("kernel", "gemm_bwd_a", 0, 80.0, 70.0, correlation=2),
        _span("kernel", "gemm_bwd_b", 0, 150.0, 90.0, correlation=3),
        _span("cuda_runtime", "cudaLaunchKernel", 77, 300.0, 3.0, correlation=4),  # after both
        _span("kernel", "stray", 0, 305.0, 500.0, correlation=4),
    ]
    lines = {row["line"]: row for row in worker["line_stats"](events, keys, 1, True)}
    assert lines[3]["cuda_us"] == pytest.approx(40.0)
    assert lines[4]["cuda_us"] == pytest.approx(160.0)  # the backward's two kernels
    assert lines[4]["cuda_total_us"] == pytest.approx(160.0)
    assert "autograd::engine::evaluate_function: MmBackward0" in lines[4]["top_ops"]
    assert lines[4]["self_cpu_us"] == pytest.approx(200.0)  # the autograd thread's CPU is its own


def test_nested_lines_give_callees_cuda_to_the_caller_total(worker) -> None:
    keys = [("/p/m.py", 10), ("/p/m.py", 20)]
    events = [
        _span("user_annotation", "ks:line:0", 1, 0.0, 100.0),
        _span("user_annotation", "ks:line:1", 1, 10.0, 50.0),
        _span("cuda_runtime", "cudaLaunchKernel", 2, 20.0, 2.0, correlation=9),  # other thread
        _span("kernel", "k", 0, 30.0, 25.0, correlation=9),
    ]
    lines = {row["line"]: row for row in worker["line_stats"](events, keys, 1, True)}
    assert lines[20]["cuda_us"] == pytest.approx(25.0)
    assert lines[10]["cuda_us"] == 0.0
    assert lines[10]["cuda_total_us"] == pytest.approx(25.0)


def test_generated_code_is_never_a_user_file(worker, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Inductor's cache under the project (a project in /tmp) is still not the user's."""
    job = worker["Job"].__new__(worker["Job"])
    job.path = str(tmp_path / "model.py")
    job.user_dirs = (str(tmp_path) + "/",)
    job._user_cache = {}
    assert job.is_user_file(str(tmp_path / "model.py"))
    assert job.is_user_file(str(tmp_path / "layers.py"))
    assert not job.is_user_file(f"{tmp_path}/torchinductor_root/ab/cab.py")


def test_the_tracers_cost_is_taken_out_per_line_run_and_never_below_zero(worker) -> None:
    """A caller line (10) whose range holds four runs of a callee's line (20), as a
    comprehension's frame does: each run's range loses the in-line cost, the caller's self
    time (the gaps between its callee's ranges) the between-lines cost per range inside it,
    and its total both for every range nested in it."""
    keys = [("/p/m.py", 10), ("/p/m.py", 20), ("/p/m.py", 30)]
    events = [
        _span("user_annotation", "ks:line:0", 1, 0.0, 100.0),
        *(_span("user_annotation", "ks:line:1", 1, 10.0 + 20 * k, 15.0) for k in range(4)),
        _span("user_annotation", "ks:line:2", 1, 200.0, 1.0),  # a line cheaper than the cost
    ]
    cost = {"in_line_us": 2.0, "between_lines_us": 1.0, "hits": 100}
    tally = worker["tally_lines"](events, len(keys), False, cost)
    rows = {r["line"]: r for r in worker["line_rows"](tally, keys, 1, set())}
    assert rows[20]["self_cpu_us"] == pytest.approx(4 * (15.0 - 2.0))
    assert rows[20]["tracer_us"] == pytest.approx(8.0)
    assert rows[10]["self_cpu_us"] == pytest.approx(40.0 - 2.0 - 4 * 1.0)
    assert rows[10]["cpu_total_us"] == pytest.approx(100.0 - 2.0 - 4 * 3.0)
    assert rows[10]["cpu_total_us"] == pytest.approx(
        rows[10]["self_cpu_us"] + rows[20]["cpu_total_us"]
    )
    assert rows[30]["self_cpu_us"] == 0.0 and rows[30]["cpu_total_us"] == 0.0
    assert rows[30]["tracer_us"] == pytest.approx(1.0)
    tally = worker["tally_lines"](events, len(keys), False)
    plain = {r["line"]: r for r in worker["line_rows"](tally, keys, 1, {2})}
    assert set(plain) == {10, 20} and plain[10]["self_cpu_us"] == pytest.approx(40.0)
    assert plain[10]["cpu_total_us"] == pytest.approx(100.0) and plain[10]["tracer_us"] == 0


def test_overcorrected_lines_stop_at_zero_and_a_callers_total_stays_signed(worker) -> None:
    """Lines cheaper than the cost read zero, but their negative remainder is kept in their
    caller's total: the cost is a mean, and a total that stopped each run at zero would keep
    only the dearer runs' excess (a caller of a 2,000-run line read 40x its time)."""
    keys = [("/p/m.py", 13), ("/p/m.py", 17), ("/p/m.py", 18)]
    events = [
        _span("user_annotation", "ks:line:0", 1, 0.0, 30.0),  # helper(x) -> square(x)
        _span("user_annotation", "ks:line:1", 1, 2.0, 1.0),  # a cheap line in square
        _span("user_annotation", "ks:line:2", 1, 4.0, 20.0),  # the matmul in square
    ]
    cost = {"in_line_us": 3.0, "between_lines_us": 4.0, "hits": 100}
    tally = worker["tally_lines"](events, len(keys), False, cost)
    rows = {r["line"]: r for r in worker["line_rows"](tally, keys, 1, set())}
    assert rows[17]["self_cpu_us"] == 0.0 and rows[17]["cpu_total_us"] == 0.0
    assert rows[18]["cpu_total_us"] == pytest.approx(17.0)
    assert rows[13]["self_cpu_us"] == 0.0  # 9 µs of its own, 3 + 2 x 4 taken out
    # its own -2 and the cheap line's -2 offset the matmul's 17
    assert rows[13]["cpu_total_us"] == pytest.approx(13.0)
    assert all(
        r["self_cpu_us"] >= 0 and r["cpu_total_us"] >= r["self_cpu_us"] for r in rows.values()
    )


def test_the_tracer_cost_reads_the_loops_ranges_and_the_calibrations_wall(worker) -> None:
    """In-line cost: the loop's ranges over its runs, less its untraced half; between lines:
    the rest of the traced wall over all the calibration's runs."""
    keys = [("<w>", 1), ("<w>", 2), ("<w>", 9)]
    events = [_span("user_annotation", "ks:line:0", 1, 10.0 * k, 5.0) for k in range(10)]
    events.append(_span("user_annotation", "ks:line:2", 1, 200.0, 100.0))
    tally = worker["tally_lines"](events, len(keys), False)
    cost = worker["tracer_cost"](tally, [0, 1, 2], [0, 1], 20.0, 220.0)
    assert cost["hits"] == 11
    assert cost["in_line_us"] == pytest.approx((50.0 - 10.0) / 10)
    assert cost["between_lines_us"] == pytest.approx((220.0 - 20.0) / 11 - 4.0)
    assert worker["tracer_cost"](tally, [], [], 20.0, 220.0) is None


def test_runs_cheaper_than_the_cost_offset_dearer_ones(worker) -> None:
    """The tracer's cost is a mean: runs of one line scatter around it both ways. Each run
    stopped at zero would keep only the dearer ones' excess (a 2,000-run comprehension read
    3-6x its real time that way); the line's sum stops at zero instead."""
    keys = [("/p/m.py", 5)]
    events = [
        _span("user_annotation", "ks:line:0", 1, 10.0 * k, d)
        for k, d in enumerate([2.5, 3.5, 2.8, 3.2, 3.0, 3.6])
    ]
    cost = {"in_line_us": 3.1, "between_lines_us": 0.0, "hits": 100}
    tally = worker["tally_lines"](events, len(keys), False, cost)
    (row,) = worker["line_rows"](tally, keys, 1, set())
    assert row["self_cpu_us"] == pytest.approx(18.6 - 6 * 3.1, abs=1e-9)  # 0, not 1.2
    assert row["tracer_us"] == pytest.approx(18.6)
    events.append(_span("user_annotation", "ks:line:0", 1, 100.0, 9.0))
    tally = worker["tally_lines"](events, len(keys), False, cost)
    (row,) = worker["line_rows"](tally, keys, 1, set())
    assert row["self_cpu_us"] == pytest.approx(27.6 - 7 * 3.1)
    assert row["self_cpu_us"] + row["tracer_us"] == pytest.approx(27.6)
    # the same runs inside a caller's range (a comprehension's frame): its total too
    keys.append(("/p/m.py", 4))
    caller = _span("user_annotation", "ks:line:1", 1, -1.0, 120.0)
    tally = worker["tally_lines"]([caller, *events], len(keys), False, cost)
    rows = {r["line"]: r for r in worker["line_rows"](tally, keys, 1, set())}
    caller_own = 120.0 - 27.6 - 3.1  # its gaps: no between-lines cost in this calibration
    assert rows[4]["cpu_total_us"] == pytest.approx(caller_own + 27.6 - 7 * 3.1)


def test_the_in_line_cost_is_read_on_the_loops_hot_lines_only(worker) -> None:
    """The loop's first line runs once and its range carries the pass's one-off start
    (~0.25 ms): it is no line run's cost, and is left out of both parts."""
    keys = [("<w>", 1), ("<w>", 2), ("<w>", 3)]
    events = [_span("user_annotation", "ks:line:0", 1, 0.0, 250.0)]  # x = 0, the first range
    events += [_span("user_annotation", "ks:line:1", 1, 300.0 + 10.0 * k, 5.0) for k in range(10)]
    events += [_span("user_annotation", "ks:line:2", 1, 500.0 + 10.0 * k, 5.0) for k in range(10)]
    tally = worker["tally_lines"](events, len(keys), False)
    cost = worker["tracer_cost"](tally, [0, 1, 2], [0, 1, 2], 20.0, 570.0)
    assert cost["in_line_us"] == pytest.approx((100.0 - 10.0) / 20)
    assert cost["between_lines_us"] == pytest.approx((570.0 - 20.0 - (250.0 - 4.5)) / 21 - 4.5)
