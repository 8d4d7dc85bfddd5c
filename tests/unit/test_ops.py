"""The op table: self/total CPU and CUDA time per op name, as torch's ``key_averages()``.

Hand-built traces with known answers, and a real CPU trace from torch checked against
``prof.key_averages()``.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from kernelscope.analysis.ops import OpStat, op_table, step_window
from kernelscope.analysis.trace_load import decode_trace, load_trace
from kernelscope.analysis.trace_model import Trace


def span(cat: str, name: str, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    """One complete event on the main thread; keyword args go to ``args``."""
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 1,
        "tid": 1,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def gpu(cat: str, name: str, ts: float, dur: float, correlation: int) -> dict[str, Any]:
    """A GPU event on device 0, stream 7."""
    args = {"device": 0, "stream": 7, "correlation": correlation}
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def decode(*events: dict[str, Any]) -> Trace:
    return decode_trace(json.dumps({"traceEvents": list(events)}).encode())


def table(trace: Trace, window: tuple[float, float] | None = None) -> dict[str, OpStat]:
    return {row.name: row for row in op_table(trace, window)}


def numbers(row: OpStat) -> tuple[int, float, float, float, float]:
    return (row.calls, row.self_cpu_us, row.cpu_total_us, row.self_cuda_us, row.cuda_total_us)


# Two steps of a call: linear (t + addmm launching two GEMM kernels, through the runtime and
# the driver API), relu, a kernel launched by the call itself, then a copy with a memcpy, a
# memset and a sync. A device sync after the last step lies outside the steps.
CUDA_TRACE = [
    span("user_annotation", "ProfilerStep#1", 0.0, 100.0),
    span("user_annotation", "ks:call", 1.0, 60.0),
    span("cpu_op", "aten::linear", 2.0, 38.0),
    span("cpu_op", "aten::t", 3.0, 2.0),
    span("cpu_op", "aten::addmm", 6.0, 24.0),
    span("cuda_runtime", "cudaLaunchKernel", 10.0, 4.0, correlation=101),
    span("cuda_driver", "cuLaunchKernelEx", 16.0, 4.0, correlation=102),
    span("cpu_op", "aten::relu", 45.0, 10.0),
    span("cuda_runtime", "cudaLaunchKernel", 47.0, 3.0, correlation=103),
    span("cuda_runtime", "cudaLaunchKernel", 56.0, 2.0, correlation=104),
    span("cpu_op", "aten::copy_", 65.0, 20.0),
    span("cuda_runtime", "cudaMemcpyAsync", 66.0, 3.5, correlation=105),
    span("cuda_runtime", "cudaMemsetAsync", 71.0, 1.5, correlation=106),
    span("cuda_runtime", "cudaStreamSynchronize", 74.0, 10.0, correlation=107),
    span("user_annotation", "ProfilerStep#2", 100.0, 100.0),
    span("user_annotation", "ks:call", 101.0, 60.0),
    span("cpu_op", "aten::relu", 110.0, 10.0),
    span("cuda_runtime", "cudaLaunchKernel", 111.0, 2.0, correlation=108),
    span("cuda_runtime", "cudaDeviceSynchronize", 205.0, 5.0, correlation=109),
    span("python_function", "model.py(10): forward", 1.5, 59.0),
    gpu("kernel", "gemm", 20.0, 8.0, 101),
    gpu("kernel", "splitk_reduce", 28.0, 2.0, 102),
    gpu("kernel", "relu", 50.0, 1.5, 103),
    gpu("kernel", "triton_fused", 60.0, 0.5, 104),
    gpu("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 70.0, 3.0, 105),
    gpu("gpu_memset", "Memset (Device)", 75.0, 0.25, 106),
    gpu("kernel", "relu", 115.0, 1.5, 108),
    gpu("gpu_user_annotation", "ks:call", 20.0, 41.0, -1),
]

EXPECTED_IN_STEPS = {
    # name: (calls, self CPU, CPU total, self CUDA, CUDA total)
    "aten::addmm": (1, 16.0, 24.0, 10.0, 10.0),
    "aten::copy_": (1, 5.0, 20.0, 3.25, 3.25),
    "aten::relu": (2, 15.0, 20.0, 3.0, 3.0),
    "ks:call": (2, 60.0, 120.0, 0.5, 13.5),
    "ProfilerStep*": (2, 60.0, 200.0, 0.0, 16.75),
    "aten::linear": (1, 12.0, 38.0, 0.0, 10.0),
    "cudaLaunchKernel": (4, 11.0, 11.0, 0.0, 0.0),
    "cudaStreamSynchronize": (1, 10.0, 10.0, 0.0, 0.0),
    "cuLaunchKernelEx": (1, 4.0, 4.0, 0.0, 0.0),
    "cudaMemcpyAsync": (1, 3.5, 3.5, 0.0, 0.0),
    "aten::t": (1, 2.0, 2.0, 0.0, 0.0),
    "cudaMemsetAsync": (1, 1.5, 1.5, 0.0, 0.0),
}


def test_cuda_trace_self_and_total_times() -> None:
    rows = table(decode(*CUDA_TRACE))
    assert rows.keys() == EXPECTED_IN_STEPS.keys()
    for name, expected in EXPECTED_IN_STEPS.items():
        assert numbers(rows[name]) == pytest.approx(expected), name


def test_rows_sorted_by_self_cuda_then_self_cpu() -> None:
    assert [row.name for row in op_table(decode(*CUDA_TRACE))] == list(EXPECTED_IN_STEPS)


def test_window_keeps_ops_that_start_inside_it() -> None:
    trace = decode(*CUDA_TRACE)
    second = table(trace, (100.0, 200.0))
    assert numbers(second["ks:call"]) == pytest.approx((1, 50.0, 60.0, 0.0, 1.5))
    assert "aten::addmm" not in second
    everything = table(trace, (-math.inf, math.inf))
    assert numbers(everything["cudaDeviceSynchronize"]) == (1, 5.0, 5.0, 0.0, 0.0)


def test_step_window_spans_the_steps() -> None:
    assert step_window(decode(*CUDA_TRACE)) == (0.0, 200.0)
    assert step_window(decode(span("python_function", "f", 0.0, 1.0))) == (0.0, 0.0)


def test_python_functions_and_gpu_events_are_not_rows() -> None:
    rows = table(decode(*CUDA_TRACE), (-math.inf, math.inf))
    assert not {"model.py(10): forward", "gemm", "Memset (Device)"} & rows.keys()
    assert rows["ks:call"].calls == 2


def test_only_child_of_the_same_name_is_absorbed() -> None:
    trace = decode(
        span("user_annotation", "dup", 0.0, 50.0),
        span("user_annotation", "dup", 5.0, 40.0),
        span("cpu_op", "aten::add", 10.0, 10.0),
        span("cuda_runtime", "cudaLaunchKernel", 12.0, 2.0, correlation=1),
        span("cpu_op", "aten::mul", 25.0, 10.0),
        span("user_annotation", "twice", 60.0, 30.0),
        span("user_annotation", "twice", 61.0, 10.0),
        span("cpu_op", "aten::add", 75.0, 5.0),
        gpu("kernel", "add", 20.0, 1.0, 1),
    )
    rows = table(trace, (-math.inf, math.inf))
    assert numbers(rows["dup"]) == pytest.approx((1, 30.0, 50.0, 0.0, 1.0))
    assert numbers(rows["aten::add"]) == pytest.approx((2, 13.0, 15.0, 1.0, 1.0))
    assert numbers(rows["twice"]) == pytest.approx((2, 25.0, 40.0, 0.0, 0.0))


def test_empty_trace_has_an_empty_table() -> None:
    assert op_table(decode(span("python_function", "f", 0.0, 1.0))) == []


Rows = dict[str, tuple[int, float, float]]


def record_cpu_trace(tmp_path: Path) -> tuple[Path, Rows, Rows]:
    """Profile ``a @ b + c`` under a warmed schedule. Returns the trace, key_averages' rows,
    and the rows torch's own algorithm gives without the python_function events, which
    torch 2.13 puts in its op tree when ``with_stack=True`` (torch 2.11 did not)."""
    torch = pytest.importorskip("torch")
    from torch.autograd.profiler_util import EventList
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    path = tmp_path / "cpu.pt.trace.json"
    raw: Rows = {}
    without_python: Rows = {}

    def rows_of(averages: Any) -> Rows:
        return {a.key: (a.count, a.self_cpu_time_total, a.cpu_time_total) for a in averages}

    def ready(prof: Any) -> None:
        prof.export_chrome_trace(str(path))
        raw.update(rows_of(prof.key_averages()))
        events = [e for e in prof.events() if not getattr(e, "is_python_function", False)]
        for event in events:
            event.cpu_children, event.cpu_parent = [], None
        rebuilt = EventList(events)
        rebuilt._build_tree()
        without_python.update(rows_of(rebuilt.key_averages()))

    a, b, c = (torch.randn(128, 128) for _ in range(3))
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=2),
        record_shapes=True,
        with_stack=True,
        on_trace_ready=ready,
    ) as prof:
        for _ in range(4):
            for _ in range(3):
                with record_function("ks:call"):
                    (a @ b + c).relu().sum().item()
            prof.step()
    return path, raw, without_python


def assert_rows_match(rows: dict[str, OpStat], expected: Rows, names: set[str]) -> None:
    for name in names:
        calls, self_cpu, cpu_total = expected[name]
        row = rows[name]
        assert row.calls == calls, name
        assert row.self_cpu_us == pytest.approx(self_cpu, rel=0.01, abs=0.01), name
        assert row.cpu_total_us == pytest.approx(cpu_total, rel=0.01, abs=0.01), name
        assert row.self_cuda_us == row.cuda_total_us == 0.0


def test_cpu_trace_matches_torch_key_averages(tmp_path: Path) -> None:
    path, raw, without_python = record_cpu_trace(tmp_path)
    trace = load_trace(path)
    assert trace.python_functions, "with_stack=True writes python_function events"
    assert [s.name for s in trace.steps] == ["ProfilerStep#2", "ProfilerStep#3"]
    rows = table(trace)
    assert {"ProfilerStep*", "ks:call", "aten::matmul", "aten::mm", "aten::add"} <= rows.keys()
    # Every op and annotation, against torch's algorithm on the same events less python frames.
    assert rows.keys() == without_python.keys()
    assert_rows_match(rows, without_python, set(rows))
    # The aten ops also match key_averages as it is: python frames only wrap them.
    assert_rows_match(rows, raw, {name for name in rows if name.startswith("aten::")})


def naive_table(trace: Trace, window: tuple[float, float]) -> dict[str, tuple[float, ...]]:
    """The op table straight from its definition, one op at a time."""
    ops = trace.ops
    own_cuda = [0.0] * len(ops)
    for g in trace.gpu_events:
        if g.op >= 0:
            own_cuda[g.op] += g.dur

    def subtree_cuda(i: int) -> float:
        return own_cuda[i] + sum(subtree_cuda(c.index) for c in trace.children(ops[i]))

    def key(name: str) -> str:
        return "ProfilerStep*" if name.startswith("ProfilerStep#") else name

    def row_of(i: int) -> int:
        parent = ops[i].parent
        only_child = parent >= 0 and len(trace.children(ops[parent])) == 1
        if only_child and key(ops[parent].name) == key(ops[i].name):
            return row_of(parent)
        return i

    rows: dict[str, list[float]] = {}
    for op in ops:
        row = ops[row_of(op.index)]
        if not window[0] <= row.ts < window[1]:
            continue
        r = rows.setdefault(key(row.name), [0, 0.0, 0.0, 0.0, 0.0])
        r[1] += op.self_dur
        r[3] += own_cuda[op.index]
        if row is op:
            r[0] += 1
            r[2] += op.dur
            r[4] += subtree_cuda(op.index)
    return {name: tuple(r) for name, r in rows.items()}


@pytest.mark.parametrize("seed", range(20))
def test_table_matches_its_definition_on_random_traces(seed: int) -> None:
    rng = random.Random(seed)
    names = ["aten::add", "aten::mm", "aten::linear", "ks:call", "ProfilerStep#1"]
    events: list[dict[str, Any]] = []
    gpu_events: list[dict[str, Any]] = []

    def fill(start: float, end: float, depth: int) -> None:
        t = start
        while depth < 4 and t < end - 1.0 and (rng.random() < 0.8 or not events):
            dur = rng.uniform(0.5, end - t)
            if rng.random() < 0.3:  # a launch, with its kernel
                correlation = len(events) + 1
                events.append(
                    span("cuda_runtime", "cudaLaunchKernel", t, dur, correlation=correlation)
                )
                gpu_events.append(
                    gpu("kernel", "k", t + dur + 1.0, rng.uniform(0.1, 5.0), correlation)
                )
            else:
                cat = "user_annotation" if rng.random() < 0.3 else "cpu_op"
                events.append(span(cat, rng.choice(names), t, dur))
                fill(t, t + dur, depth + 1)
            t += dur + rng.uniform(0.0, 2.0)

    fill(0.0, 1000.0, 0)
    rng.shuffle(events)
    trace = decode(*events, *gpu_events)
    window = (rng.uniform(-10.0, 300.0), rng.uniform(500.0, 1100.0))
    expected = naive_table(trace, window)
    got = table(trace, window)
    assert got.keys() == expected.keys()
    for name, row in got.items():
        assert numbers(row) == pytest.approx(expected[name]), name
