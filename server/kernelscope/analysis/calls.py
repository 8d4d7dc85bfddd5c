"""Where the function's calls are in a trace, and which host and GPU work belongs to them.

A call is a host span on the caller's thread: kernelscope's ``ks:call`` range, else what a
``ProfilerStep#N`` encloses (from its first op to its last, so the profiler's own step cost,
``p.step()`` and stack capture, stays out), else a top-level annotation, else the whole
trace. GPU work belongs to the call whose window holds its launch, on any thread: autograd
runs ``backward()`` on an engine thread of its own, and torch.compile and user threads
launch from others. Work launched by an earlier step, whose launch the trace does not hold,
belongs to none.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from functools import partial

import msgspec

from kernelscope.analysis.trace_model import STEP_PREFIX, USER_ANNOTATION, GpuEvent, Op, Trace

CALL_RANGE = "ks:call"  # the worker's record_function around each call of the function
COLD_RANGE = "ks:cold"  # and around the cold first call, in its own trace


@dataclass(frozen=True)
class Calls:
    """The calls of the function in a trace: one window (µs) per call, in time order."""

    starts: list[float]
    ends: list[float]
    source: str
    """How they were found: ``ks:call``, ``profiler steps``, ``annotations`` or ``trace``."""
    ranges: list[Op]
    """The spans that mark the calls (empty when a window is a step's content)."""

    def __len__(self) -> int:
        return len(self.starts)

    def index_of(self, ts: float) -> int:
        """The call whose window holds ``ts``, -1 if none."""
        i = bisect_right(self.starts, ts) - 1
        return i if i >= 0 and ts <= self.ends[i] else -1

    @property
    def host_us(self) -> float:
        """The calls' host time in all: their ranges' durations (exact), else their windows'."""
        if self.ranges:
            return sum(r.dur for r in self.ranges)
        return sum(e - s for s, e in zip(self.starts, self.ends, strict=True))

    @property
    def host_each(self) -> list[float]:
        """Each call's host time (µs), in time order, as ``host_us`` sums them."""
        if self.ranges:
            return [r.dur for r in sorted(self.ranges, key=lambda r: r.ts)]
        return [e - s for s, e in zip(self.starts, self.ends, strict=True)]

    @property
    def marked(self) -> bool:
        """Whether the trace marks the calls themselves (kernelscope's ``ks:call``)."""
        return self.source == CALL_RANGE


def find_calls(trace: Trace) -> Calls:
    """The function's calls: ``ks:call`` ranges, else the content of each profiler step,
    else top-level annotations, else one window over the whole trace."""
    marked = [a for a in trace.user_annotations if a.name == CALL_RANGE]
    if marked:
        return _calls(marked, CALL_RANGE, marked)
    steps = [a for a in trace.user_annotations if a.name.startswith(STEP_PREFIX)]
    if steps:
        return _step_contents(trace, steps)
    tops = [a for a in trace.user_annotations if a.parent < 0]
    if tops:
        return _calls(tops, "annotations", tops)
    spans = [(op.ts, op.end) for op in trace.ops] + [(g.ts, g.end) for g in trace.gpu_events]
    if not spans:
        return Calls([], [], "trace", [])
    return Calls([min(s for s, _ in spans)], [max(e for _, e in spans)], "trace", [])


def _calls(spans: list[Op], source: str, ranges: list[Op]) -> Calls:
    spans = sorted(spans, key=lambda op: op.ts)
    return Calls([op.ts for op in spans], [op.end for op in spans], source, ranges)


def _step_contents(trace: Trace, steps: list[Op]) -> Calls:
    """Each step's window narrowed to the ops it encloses on its thread."""
    starts: list[float] = []
    ends: list[float] = []
    for step in sorted(steps, key=lambda op: op.ts):
        inside = [
            c
            for c in trace.children(step)
            if not (c.cat == USER_ANNOTATION and c.name.startswith(STEP_PREFIX))
        ]
        if inside:
            starts.append(min(c.ts for c in inside))
            ends.append(max(c.end for c in inside))
        else:
            starts.append(step.ts)
            ends.append(step.end)
    return Calls(starts, ends, "profiler steps", [])


def gpu_work(trace: Trace, calls: Calls) -> list[tuple[int, GpuEvent]]:
    """The GPU events of the calls with the index of their call, in time order: launched
    inside a call's window (by the launch's time, on any thread); without a launch in the
    trace, started inside one, unless an earlier step launched it (its correlation id is
    below every launch the trace holds: ids grow with each launch)."""
    ops = trace.ops
    first_launch = min((op.correlation for op in trace.launches if op.correlation >= 0), default=-1)
    starts, ends = calls.starts, calls.ends
    events = [g for g in trace.gpu_events if g.dur > 0]
    # when the GPU event was launched (its own start when the trace has no launch for it);
    # -inf for an earlier step's work, which falls in no window
    times = [
        ops[g.launch].ts
        if g.launch >= 0
        else (-math.inf if 0 <= g.correlation < first_launch else g.ts)
        for g in events
    ]
    index = list(map(partial(bisect_right, starts), times))
    return [
        (i - 1, g)
        for i, t, g in zip(index, times, events, strict=True)
        if i > 0 and t <= ends[i - 1]
    ]


def call_ops(trace: Trace, calls: Calls) -> list[bool]:
    """For each op of the trace, whether it is the function's work: inside a call's range on
    the caller's thread (the range itself excluded), or on another thread, inside a top-level
    span that starts in a call's window. Without marked calls, every op that starts in a
    window."""
    ops = trace.ops
    keep = [False] * len(ops)
    if not calls.marked:
        for index, op in enumerate(ops):
            keep[index] = calls.index_of(op.ts) >= 0
        return keep
    callers = {(r.pid, r.tid) for r in calls.ranges}
    range_ids = {r.index for r in calls.ranges}
    for index, op in enumerate(ops):
        parent = op.parent
        if parent >= 0:
            keep[index] = keep[parent] or parent in range_ids
        elif (op.pid, op.tid) not in callers:
            keep[index] = calls.index_of(op.ts) >= 0
    return keep


class _Sequence(msgspec.Struct):
    number: int = msgspec.field(default=-1, name="Sequence number")
    forward_thread: int = msgspec.field(default=-1, name="Fwd thread id")


_SEQUENCE = msgspec.json.Decoder(_Sequence)


def forward_op(trace: Trace, op: Op) -> Op | None:
    """The forward op whose autograd node ran ``op`` in a backward pass (``op`` or an op
    around it carries the node's ``Sequence number``; the forward op, on another thread,
    carries the same number with ``Fwd thread id`` 0), the outermost such; None for ops
    outside a backward pass."""
    ops = trace.ops
    i = op.index
    while i >= 0:
        seq = _sequence(ops[i])
        if seq.number >= 0 and seq.forward_thread > 0:
            break
        i = ops[i].parent
    else:
        return None
    backward = ops[i]
    for other in trace.cpu_ops:
        s = _sequence(other)
        if s.number == seq.number and s.forward_thread == 0 and other.tid != backward.tid:
            return other
    return None


def _sequence(op: Op) -> _Sequence:
    try:
        return _SEQUENCE.decode(op.args)
    except msgspec.MsgspecError:
        return _Sequence()
