"""The analyses' fast paths give what the plain ones give: memoized FLOPs and bytes, the host
ops of GPU gaps looked up per gap, syncs placed by walking back through the Python frames.
Each is checked against a straightforward reference on the recorded fixtures and on small
hand-built traces (the speed itself is measured by bench/trace_speed.py)."""

from __future__ import annotations

import gzip
import heapq
import json
from pathlib import Path

import msgspec
import pytest

from kernelscope.analysis import facts
from kernelscope.analysis.calls import find_calls
from kernelscope.analysis.costs import (
    CONVOLUTIONS,
    FLOP_OPS,
    MATMULS,
    OpCost,
    OpCosts,
    concrete_inputs,
    flops_of,
    matmul_dtype,
    op_bytes,
)
from kernelscope.analysis.facts import Facts, Options, is_sync
from kernelscope.analysis.syncs import python_places
from kernelscope.analysis.timeline import Timeline, _HostOps, build_timeline
from kernelscope.analysis.trace_load import decode_trace, load_trace
from kernelscope.analysis.trace_model import CPU_OP, Event, Op, Trace
from kernelscope.analysis.user_code import user_frame

from support import FIXTURES

TRACES = sorted(FIXTURES.glob("*/trace.json.gz")) + sorted(FIXTURES.glob("*/cold.json.gz"))
IDS = [f"{p.parent.name}/{p.name.split('.')[0]}" for p in TRACES]


# -- references: the straightforward computations the fast paths replace --------------------


def reference_cost(op: Op) -> OpCost:
    inputs = op.inputs()
    dtype = matmul_dtype(inputs) if op.name in MATMULS else None
    return OpCost(flops_of(op), op_bytes(op.name, inputs, concrete_inputs(op)), dtype)


def reference_host_ops(trace: Trace, start: float, end: float) -> tuple[str, ...]:
    """The outermost aten ops overlapping [start, end), longest overlap first: a scan of all."""
    ops = trace.ops
    overlap: dict[str, float] = {}
    for op in trace.cpu_ops:
        if op.parent >= 0 and ops[op.parent].cat == CPU_OP:
            continue
        if op.ts < end and op.end > start:
            o = min(op.end, end) - max(op.ts, start)
            if o > 0:
                overlap[op.name] = overlap.get(op.name, 0.0) + o
    return tuple(sorted(overlap, key=lambda n: -overlap[n])[:3])


def file_frames(path: Path) -> list[Event]:
    """Every python_function frame of a trace file, the user's and the others (read apart
    from the trace model, which keeps only the user's)."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    return [
        Event(e["name"], e["ts"], e["dur"], e["cat"], e["pid"], e["tid"])
        for e in events
        if e.get("cat") == "python_function"
    ]


def reference_places(frames: list[Event], ops: list[Op]) -> list[tuple[str | None, int | None]]:
    """Per op, the innermost user frame around it: a sweep through every frame in time order."""
    frames = sorted(frames, key=lambda fn: fn.ts)
    places: list[tuple[str | None, int | None]] = [(None, None)] * len(ops)
    open_frames: dict[int | str, list[tuple[float, str, int]]] = {}
    nxt = 0
    for i in sorted(range(len(ops)), key=lambda i: ops[i].ts):
        op = ops[i]
        while nxt < len(frames) and frames[nxt].ts <= op.ts:
            fn = frames[nxt]
            nxt += 1
            place = user_frame(fn.name)
            if place is not None:
                stack = open_frames.setdefault(fn.tid, [])
                while stack and stack[-1][0] < fn.ts:
                    stack.pop()
                stack.append((fn.ts + fn.dur, *place))
        for end, path, line in reversed(open_frames.get(op.tid, [])):
            if end >= op.end:
                places[i] = (path, line)
                break
    return places


def reference_own(trace: Trace, op: Op) -> bool:
    marked = any(a.name == "ks:call" for a in trace.user_annotations)
    inside = [False] * len(trace.ops)
    for other in trace.ops:
        if other.parent >= 0:
            parent = trace.ops[other.parent]
            inside[other.index] = inside[other.parent] or parent.name == "ks:call"
    if marked:
        return inside[op.index]
    calls = find_calls(trace)  # unmarked: inside a call's window (a scan of every window)
    return any(s <= op.ts <= e for s, e in zip(calls.starts, calls.ends, strict=True))


def facts_of(trace: Trace) -> Facts:
    calls = find_calls(trace)
    timeline = build_timeline(trace, 20.0, calls)
    return facts.facts_of(trace, None, timeline, Options(), None, None, calls)


# -- the fixtures -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", TRACES, ids=IDS)
def test_memoized_costs_are_the_plain_ones(path: Path) -> None:
    trace = load_trace(path)
    expected = [reference_cost(op) for op in trace.cpu_ops]
    assert OpCosts().many(trace.cpu_ops) == expected
    costs = OpCosts()
    assert [costs(op) for op in trace.cpu_ops] == expected
    assert costs.many(trace.cpu_ops) == expected  # from the memo this time


@pytest.mark.parametrize("path", TRACES, ids=IDS)
@pytest.mark.parametrize("min_gap_us", [0.0, 5.0, 20.0])
def test_gaps_name_the_host_ops_a_full_scan_finds(path: Path, min_gap_us: float) -> None:
    trace = load_trace(path)
    tl = build_timeline(trace, min_gap_us)
    assert [(g.start, g.end) for g in tl.gaps] == list(zip(tl.gap_starts, tl.gap_ends, strict=True))
    for gap in tl.gaps:
        assert gap.cpu_ops == reference_host_ops(trace, gap.start, gap.end)
    assert tl.longest_gaps(3) == sorted(tl.gaps, key=lambda g: -g.dur)[:3]
    assert tl.idle_us == sum(g.dur for g in tl.gaps)


@pytest.mark.parametrize("path", TRACES, ids=IDS)
def test_long_windows_are_narrowed_by_the_running_maximum(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_HostOps, "_FEW", 0)  # always take the running maximum's bound
    trace = load_trace(path)
    host = _HostOps(trace)
    tl = build_timeline(trace, 0.0)
    for start, end in zip(tl.gap_starts, tl.gap_ends, strict=True):
        assert host.names_in(start, end) == reference_host_ops(trace, start, end)


@pytest.mark.parametrize("path", TRACES, ids=IDS)
def test_syncs_are_placed_as_a_sweep_of_all_frames_places_them(path: Path) -> None:
    trace = load_trace(path)
    facts = facts_of(trace)
    syncs = [op for op in trace.launches if is_sync(op.name)]
    assert facts.own_syncs == [op for op in syncs if reference_own(trace, op)]
    frames = file_frames(path)
    assert python_places(trace, syncs) == reference_places(frames, syncs)
    assert trace.frames_seen == len(frames)


def test_the_syncs_fixture_has_syncs_and_stacks() -> None:
    """The sync test above is only as good as its fixture: syncs placed on user frames."""
    trace = load_trace(FIXTURES / "syncs" / "trace.json.gz")
    places = python_places(trace, facts_of(trace).own_syncs)
    assert any(path is not None for path, _ in places)


# -- hand-built traces ------------------------------------------------------------------------


def _trace(events: list[dict[str, object]]) -> Trace:
    return decode_trace(msgspec.json.encode({"traceEvents": events}))


def _op(name: str, ts: float, dur: float, args: object, tid: int = 1) -> dict[str, object]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "pid": 1,
            "tid": tid, "args": args}  # fmt: skip


def test_costs_of_malformed_args_and_convolutions() -> None:
    x = {"Input Dims": [[8, 3, 32, 32], [16, 3, 3, 3]], "Input type": ["float", "float"]}
    mm = {"Input Dims": [[4, 8], [8, 2]], "Input type": ["c10::Half"] * 2}
    add = {"Input Dims": [[4, 8], [4, 8]], "Input type": ["float"] * 2}
    trace = _trace(
        [
            _op("aten::conv2d", 0, 1, {**x, "Concrete Inputs": ["", "", "", "[2, 2]"]}),
            _op("aten::conv2d", 2, 1, {**x, "Concrete Inputs": ["", "", "", "[1, 1]"]}),
            _op("aten::conv2d", 4, 1, {**x, "Concrete Inputs": ["", "", "", "[2, 2]"]}),
            _op("aten::mm", 6, 1, mm),
            _op("aten::mm", 8, 1, {"Input Dims": "not a list", "Input type": ["float"]}),
            _op("aten::add", 10, 1, add),
            _op("aten::add", 12, 1, {"External id": 7, **add}),
            _op("aten::add\u0000x", 14, 1, {"Input Dims": [[4, 8]], "Input type": ["float"]}),
        ]
    )
    ops = trace.cpu_ops
    expected = [reference_cost(op) for op in ops]
    assert OpCosts().many(ops) == expected
    assert [OpCosts()(op) for op in ops] == expected
    assert {op.name for op in ops} >= {"aten::conv2d"} and "aten::conv2d" in CONVOLUTIONS
    assert expected[0].flops != expected[1].flops  # the strides are part of the key
    assert "aten::mm" in FLOP_OPS and expected[4] == OpCost(0.0, 0.0, None)
    # one op's args that are not an object: the batch decode falls back op by op
    bad = Op("cpu_op", "aten::add", 1, 1, 20.0, 1.0, b"[1, 2]", 1.0)
    assert OpCosts().many([*ops, bad]) == [*expected, reference_cost(bad)]


def test_gaps_with_a_long_op_open_across_them() -> None:
    """An op open since long before a gap is found, both by the longest-op bound and by the
    running maximum, and nested aten ops are not counted."""
    events: list[dict[str, object]] = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 20_000,
         "pid": 1, "tid": 1},
        _op("aten::long", 1, 19_000, {}, tid=2),
        _op("aten::inner", 2, 18_000, {}, tid=2),
    ]  # fmt: skip
    t = 10.0
    for k in range(400):  # many short ops and kernels, 30 µs apart, on another thread
        events.append(_op("aten::short", t, 5, {}, tid=1))
        events.append({"ph": "X", "cat": "kernel", "name": f"k{k}", "ts": t, "dur": 5,
                       "pid": 0, "tid": 7, "args": {"device": 0, "stream": 7}})  # fmt: skip
        t += 30 if k != 200 else 500
    trace = _trace(events)
    tl: Timeline = build_timeline(trace, 20.0)
    assert len(tl.gaps) == 399
    for gap in tl.gaps:
        assert gap.cpu_ops == reference_host_ops(trace, gap.start, gap.end)
        assert "aten::inner" not in gap.cpu_ops and gap.cpu_ops[0] == "aten::long"
    longest = tl.longest_gaps(2)
    assert longest == heapq.nsmallest(2, tl.gaps, key=lambda g: -g.dur)
    assert longest[0].dur == pytest.approx(495.0)
