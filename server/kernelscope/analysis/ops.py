"""The per-op table of self and total CPU and CUDA time, as torch's ``key_averages()``.

Rows are host spans: aten ops, ``record_function`` annotations (``ProfilerStep#N`` counted
as ``ProfilerStep*``) and runtime/driver calls, which torch also counts as CPU events and as
children of the op that made them. GPU events are not rows: their time is the self CUDA time
of the op that launched them. As in torch, an op whose only child has its own name absorbs
that child (``EventList._remove_dup_nodes``).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from operator import attrgetter

import msgspec

from kernelscope.analysis.calls import Calls, call_ops
from kernelscope.analysis.trace_model import STEP_PREFIX, Op, Trace

__all__ = ["OpStat", "op_table", "step_window"]

STEP_KEY = "ProfilerStep*"
_PARENT = attrgetter("parent")
_NAME = attrgetter("name")
_SELF_DUR = attrgetter("self_dur")
_TS = attrgetter("ts")


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
    trace: Trace,
    window: tuple[float, float] | None = None,
    calls: Calls | None = None,
) -> list[OpStat]:
    """Per-name totals of the ops that start inside ``window`` (default: inside a step);
    with ``calls``, of the function's own ops instead (``calls.call_ops``: other threads
    included), GPU work launched straight from a call's range (a CUDA-graph replay) counted
    under its launch. Sorted by self CUDA time, then self CPU time, largest first."""
    ops = trace.ops
    parents = list(map(_PARENT, ops))
    keys = _keys(list(map(_NAME, ops)))
    if calls is not None:
        keep = call_ops(trace, calls)
        self_cuda = _self_cuda(trace, keep)
    else:
        keep = _starts_in(ops, _intervals(trace, window))
        self_cuda = _self_cuda(trace)
    cuda_total = _subtree_sums(parents, self_cuda)
    row_of = _absorbed_into(parents, keys)
    # Sums per row name, kept in lists by the name's number: no Struct updates in the loop.
    number: dict[str, int] = {}
    rows = [number.setdefault(keys[row], len(number)) if keep[row] else -1 for row in row_of]
    counts = [0] * len(number)
    self_cpu = [0.0] * len(number)
    cpu_total = [0.0] * len(number)
    own_cuda = [0.0] * len(number)
    total_cuda = [0.0] * len(number)
    for index, (row, k, self_dur, cuda) in enumerate(
        zip(row_of, rows, map(_SELF_DUR, ops), self_cuda, strict=True)
    ):
        if k < 0:
            continue
        self_cpu[k] += self_dur
        own_cuda[k] += cuda
        if row == index:
            counts[k] += 1
            cpu_total[k] += ops[index].dur
            total_cuda[k] += cuda_total[index]
    stats = [
        OpStat(key, counts[k], self_cpu[k], cpu_total[k], own_cuda[k], total_cuda[k])
        for key, k in number.items()
    ]
    return sorted(stats, key=lambda r: (r.self_cuda_us, r.self_cpu_us), reverse=True)


def _key(name: str) -> str:
    return STEP_KEY if name.startswith(STEP_PREFIX) else name


def _keys(names: list[str]) -> list[str]:
    """Each op's row name (``_key``), worked out once per distinct name."""
    key_of = {name: _key(name) for name in set(names)}
    return list(map(key_of.__getitem__, names))


def _absorbed_into(parents: list[int], keys: list[str]) -> list[int]:
    """For each op, the op whose row it counts in: its own, or, as torch's
    ``_remove_dup_nodes``, that of a parent of the same name of which it is the only child."""
    row_of = list(range(len(parents)))
    child_counts = Counter(parents)
    only_child = dict(zip(parents, row_of, strict=True))  # the last child, the only one here
    for parent in sorted(p for p, n in child_counts.items() if n == 1 and p >= 0):
        child = only_child[parent]  # parents come before their children: row_of[parent] is set
        if keys[child] == keys[parent]:
            row_of[child] = row_of[parent]
    return row_of


def _self_cuda(trace: Trace, keep: list[bool] | None = None) -> list[float]:
    """GPU time (kernels, copies, sets) of each op's own launches; with ``keep``, work whose
    op is not kept but whose launch is goes to the launch (``cudaGraphLaunch`` under
    ``ks:call``)."""
    own = [0.0] * len(trace.ops)
    for event in trace.gpu_events:
        owner = event.op
        if keep is not None and owner >= 0 and not keep[owner] and event.launch >= 0:
            owner = event.launch
        if owner >= 0:
            own[owner] += event.dur
    return own


def _subtree_sums(parents: list[int], values: list[float]) -> list[float]:
    """Each op's value plus all its descendants'; parents precede children."""
    sums = list(values)
    for index in range(len(parents) - 1, -1, -1):
        value = sums[index]
        if value:
            parent = parents[index]
            if parent >= 0:
                sums[parent] += value
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
    """For each op, whether it starts inside one of the intervals; ops are sorted by start."""
    op_starts = list(map(_TS, ops))
    keep = [False] * len(ops)
    for start, end in zip(*intervals, strict=True):
        first, stop = bisect_left(op_starts, start), bisect_left(op_starts, end)
        keep[first:stop] = [True] * (stop - first)
    return keep
