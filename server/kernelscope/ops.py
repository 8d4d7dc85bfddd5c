"""The per-op table of self and total CPU and CUDA time, as torch's ``key_averages()``.

Rows are host spans: aten ops, ``record_function`` annotations (``ProfilerStep#N`` counted
as ``ProfilerStep*``) and runtime/driver calls, which torch also counts as CPU events and as
children of the op that made them. GPU events are not rows: their time is the self CUDA time
of the op that launched them. As in torch, an op whose only child has its own name absorbs
that child (``EventList._remove_dup_nodes``).
"""

from __future__ import annotations

from bisect import bisect_right

import msgspec

from kernelscope.trace_model import STEP_PREFIX, Op, Trace

__all__ = ["OpStat", "op_table", "step_window"]

STEP_KEY = "ProfilerStep*"


class OpStat(msgspec.Struct):
    """Totals for one op name over a window; times in µs."""

    name: str
    calls: int
    self_cpu_us: float
    cpu_total_us: float
    self_cuda_us: float
    cuda_total_us: float


def step_window(trace: Trace) -> tuple[float, float]:
    """From the first step's start to the last step's end; (0, 0) when there are no steps."""
    if not trace.steps:
        return (0.0, 0.0)
    return (min(s.ts for s in trace.steps), max(s.end for s in trace.steps))


def op_table(
    trace: Trace, window: tuple[float, float] | None = None, within: str | None = None
) -> list[OpStat]:
    """Per-name totals of the ops that start inside ``window`` (default: inside a step) and,
    with ``within``, lie inside an annotation of that name (the annotation itself excluded);
    sorted by self CUDA time, then self CPU time, largest first."""
    ops = trace.ops
    self_cuda = _self_cuda(trace)
    cuda_total = _subtree_sums(ops, self_cuda)
    keep = _starts_in(ops, _intervals(trace, window))
    if within is not None:
        keep = [k and inside for k, inside in zip(keep, _descends_from(ops, within), strict=True)]
    rows: dict[str, OpStat] = {}
    row_of = _absorbed_into(ops)
    for op in ops:
        row_op = ops[row_of[op.index]]
        if not keep[row_op.index]:
            continue
        key = _key(row_op.name)
        row = rows.get(key)
        if row is None:
            row = rows[key] = OpStat(key, 0, 0.0, 0.0, 0.0, 0.0)
        row.self_cpu_us += op.self_dur
        row.self_cuda_us += self_cuda[op.index]
        if row_op is op:
            row.calls += 1
            row.cpu_total_us += op.dur
            row.cuda_total_us += cuda_total[op.index]
    return sorted(rows.values(), key=lambda r: (r.self_cuda_us, r.self_cpu_us), reverse=True)


def _descends_from(ops: list[Op], name: str) -> list[bool]:
    """For each op, whether an ancestor is named ``name``; parents precede children."""
    inside = [False] * len(ops)
    for op in ops:
        parent = op.parent
        if parent >= 0:
            inside[op.index] = inside[parent] or ops[parent].name == name
    return inside


def _key(name: str) -> str:
    return STEP_KEY if name.startswith(STEP_PREFIX) else name


def _absorbed_into(ops: list[Op]) -> list[int]:
    """For each op, the op whose row it counts in: its own, or, as torch's
    ``_remove_dup_nodes``, that of a parent of the same name of which it is the only child."""
    child_counts = [0] * len(ops)
    for op in ops:
        if op.parent >= 0:
            child_counts[op.parent] += 1
    row_of = list(range(len(ops)))
    for op in ops:  # parents come before their children
        parent = op.parent
        if parent >= 0 and child_counts[parent] == 1 and _key(ops[parent].name) == _key(op.name):
            row_of[op.index] = row_of[parent]
    return row_of


def _self_cuda(trace: Trace) -> list[float]:
    """GPU time (kernels, copies, sets) of each op's own launches."""
    own = [0.0] * len(trace.ops)
    for event in trace.gpu_events:
        if event.op >= 0:
            own[event.op] += event.dur
    return own


def _subtree_sums(ops: list[Op], values: list[float]) -> list[float]:
    """Each op's value plus all its descendants'; parents precede children in ``ops``."""
    sums = list(values)
    for op in reversed(ops):
        if op.parent >= 0:
            sums[op.parent] += sums[op.index]
    return sums


def _intervals(trace: Trace, window: tuple[float, float] | None) -> tuple[list[float], list[float]]:
    """Sorted, disjoint [start, end) intervals, as lists of starts and of ends."""
    if window is not None:
        return [window[0]], [window[1]]
    starts: list[float] = []
    ends: list[float] = []
    for step in sorted(trace.steps, key=lambda s: s.ts):
        if ends and step.ts <= ends[-1]:
            ends[-1] = max(ends[-1], step.end)
        else:
            starts.append(step.ts)
            ends.append(step.end)
    return starts, ends


def _starts_in(ops: list[Op], intervals: tuple[list[float], list[float]]) -> list[bool]:
    starts, ends = intervals
    keep: list[bool] = []
    for op in ops:
        k = bisect_right(starts, op.ts) - 1
        keep.append(k >= 0 and op.ts < ends[k])
    return keep
