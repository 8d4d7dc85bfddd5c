"""The GPU's timeline over the active steps: busy time, idle gaps, and the launch queue."""

from __future__ import annotations

import heapq
import math
import statistics
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from functools import cached_property
from itertools import accumulate
from operator import add, attrgetter, sub

from kernelscope.trace_model import CPU_OP, GpuEvent, Trace

_TS = attrgetter("ts")
_DUR = attrgetter("dur")
_CAT = attrgetter("cat")
_DEVICE = attrgetter("device")
_STREAM = attrgetter("stream")


@dataclass(frozen=True)
class Gap:
    """An interval with no GPU work on any stream, inside the window."""

    start: float
    end: float
    cpu_ops: tuple[str, ...]  # what the host ran meanwhile, longest overlap first

    @property
    def dur(self) -> float:
        """Length in µs."""
        return self.end - self.start


@dataclass(frozen=True)
class Timeline:
    """GPU work of the analyzed window (µs); `window` spans the steps and their GPU tail."""

    window: tuple[float, float]
    steps: int
    events: list[GpuEvent]
    busy_us: float
    kernel_us: float
    kernels: int
    gap_starts: list[float] = field(default_factory=list[float])
    """Where each gap starts, in time order (``gaps`` has them with the host ops)."""
    gap_ends: list[float] = field(default_factory=list[float])
    """Where each gap ends."""
    queue_us: list[float] = field(default_factory=list[float])
    launch_us: list[float] = field(default_factory=list[float])
    streams: int = 0
    devices: int = 0
    trace: Trace | None = field(default=None, repr=False, compare=False)
    """The trace the host ops of the gaps are looked up in."""

    @property
    def wall_us(self) -> float:
        """Length of the window."""
        return self.window[1] - self.window[0]

    @property
    def busy_fraction(self) -> float | None:
        """Share of the window in which some GPU work ran; None without GPU work."""
        if not self.events or self.wall_us <= 0:
            return None
        return min(1.0, self.busy_us / self.wall_us)

    @property
    def median_queue_us(self) -> float | None:
        """Median launch → start delay of the kernels."""
        return statistics.median(self.queue_us) if self.queue_us else None

    @property
    def mean_launch_us(self) -> float | None:
        """Mean host time of one launch call."""
        return statistics.fmean(self.launch_us) if self.launch_us else None

    @property
    def idle_us(self) -> float:
        """Total length of the gaps."""
        return sum(map(sub, self.gap_ends, self.gap_starts))

    @cached_property
    def gaps(self) -> list[Gap]:
        """Intervals longer than the minimum gap with no GPU work on any stream, in time
        order, with the host ops that ran meanwhile (looked up when first read)."""
        return list(map(self._gap, self.gap_starts, self.gap_ends))

    def longest_gaps(self, n: int) -> list[Gap]:
        """The ``n`` longest gaps, longest first (earlier first among equal ones)."""
        lengths = list(map(sub, self.gap_ends, self.gap_starts))
        longest = heapq.nlargest(n, range(len(lengths)), key=lengths.__getitem__)
        return [self._gap(self.gap_starts[i], self.gap_ends[i]) for i in longest]

    def _gap(self, start: float, end: float) -> Gap:
        names = self._host.names_in(start, end) if self.trace is not None else ()
        return Gap(start, end, names)

    @cached_property
    def _host(self) -> _HostOps:
        assert self.trace is not None
        return _HostOps(self.trace)


def step_bounds(trace: Trace) -> tuple[float, float] | None:
    """From the first step's start to the last step's end."""
    if not trace.steps:
        return None
    return min(s.ts for s in trace.steps), max(s.end for s in trace.steps)


def build_timeline(trace: Trace, min_gap_us: float = 20.0) -> Timeline:
    """Busy time, gaps longer than `min_gap_us`, and queue delays of the steps' GPU work."""
    bounds = step_bounds(trace)
    steps = max(len(trace.steps), 1)
    if bounds is None:
        starts = [op.ts for op in trace.ops] + [g.ts for g in trace.gpu_events]
        ends = [op.end for op in trace.ops] + [g.end for g in trace.gpu_events]
        bounds = (min(starts), max(ends)) if starts else (0.0, 0.0)
    lo, hi = bounds
    ops = trace.ops
    # trace.gpu_events is sorted by ts, and so is what is kept of it. Launched inside the
    # window (by the launch's time), else started inside it.
    events = [
        g
        for g in trace.gpu_events
        if g.dur > 0 and lo <= (ops[g.launch].ts if g.launch >= 0 else g.ts) <= hi
    ]
    starts = list(map(_TS, events))
    ends = list(map(add, starts, map(_DUR, events)))
    end = max(hi, *ends) if ends else hi
    window = (lo, end)
    merged_starts, merged_ends = _merge(starts, ends)
    busy = sum(map(sub, merged_ends, merged_starts))
    gap_starts, gap_ends = _holes(merged_starts, merged_ends, window, min_gap_us)
    cats = list(map(_CAT, events))
    queue = [g.ts - ops[g.launch].ts for g in events if g.launch >= 0 and g.cat == "kernel"]
    launch_cost = [op.dur for op in trace.launches if "Launch" in op.name and lo <= op.ts <= end]
    devices = list(map(_DEVICE, events))
    return Timeline(
        window=window,
        steps=steps,
        events=events,
        busy_us=busy,
        kernel_us=sum(map(_DUR, events)),
        kernels=cats.count("kernel"),
        gap_starts=gap_starts,
        gap_ends=gap_ends,
        queue_us=queue,
        launch_us=launch_cost,
        streams=len(set(zip(devices, map(_STREAM, events), strict=True))),
        devices=len(set(devices)),
        trace=trace,
    )


def _merge(starts: list[float], ends: list[float]) -> tuple[list[float], list[float]]:
    """The union of the intervals (sorted by start), as lists of starts and of ends."""
    out_starts: list[float] = []
    out_ends: list[float] = []
    last = -math.inf
    for start, end in zip(starts, ends, strict=True):
        if out_ends and start <= last:
            if end > last:
                out_ends[-1] = last = end
        else:
            out_starts.append(start)
            out_ends.append(end)
            last = end
    return out_starts, out_ends


def _holes(
    starts: list[float], ends: list[float], window: tuple[float, float], min_gap_us: float
) -> tuple[list[float], list[float]]:
    """Idle intervals of at least ``min_gap_us`` between busy ones (not before the first or
    after the last), clipped to the window, as lists of starts and of ends (floats, which
    the garbage collector does not track: a collection would walk the trace's lists)."""
    lo, hi = window
    hole_starts: list[float] = []
    hole_ends: list[float] = []
    # each busy interval's end and the next one's start
    for a_end, b_start in zip(ends[:-1], starts[1:], strict=True):
        start = lo if lo > a_end else a_end  # max(a_end, lo), without the call
        end = hi if hi < b_start else b_start  # min(b_start, hi)
        if end > start and end - start >= min_gap_us:
            hole_starts.append(start)
            hole_ends.append(end)
    return hole_starts, hole_ends


class _HostOps:
    """Looks up the outermost aten ops that overlap an interval: those that start in it,
    found by bisection, and those still open at its start, which started at most the
    longest op's duration before it. Where that leaves many ops to look at (one op runs
    long), the running maximum of the ops' ends narrows it down: an op that every op
    before it ended before the start of the interval is the first to look at."""

    _FEW = 256  # ops to look through before narrowing down with the running maximum

    def __init__(self, trace: Trace) -> None:
        self.ops = trace.ops
        self.cpu_ops = trace.cpu_ops  # in ops order: sorted by ts
        self.longest = max(map(_DUR, self.cpu_ops), default=0.0)

    @cached_property
    def reach(self) -> list[float]:
        """For each op, the latest end of the ops up to it."""
        ends = map(add, map(_TS, self.cpu_ops), map(_DUR, self.cpu_ops))
        return list(accumulate(ends, max))

    def names_in(self, start: float, end: float, top: int = 3) -> tuple[str, ...]:
        """The names of the outermost aten ops overlapping [start, end), longest overlap first
        (earlier first among equal ones)."""
        ops, cpu_ops = self.ops, self.cpu_ops
        # a margin far above the rounding of ts + dur, even at ns timestamps
        earliest = start - self.longest - (1.0 + abs(start) * 1e-12)
        first = bisect_left(cpu_ops, earliest, key=_TS)
        stop = bisect_left(cpu_ops, end, lo=first, key=_TS)
        if stop - first > self._FEW:
            first = max(first, bisect_right(self.reach, start))  # before it, all ended by start
        overlap: dict[str, float] = {}
        for i in range(first, stop):
            op = cpu_ops[i]
            op_end = op.ts + op.dur
            if op_end <= start or (op.parent >= 0 and ops[op.parent].cat == CPU_OP):
                continue
            o = min(op_end, end) - max(op.ts, start)
            if o > 0:
                overlap[op.name] = overlap.get(op.name, 0.0) + o
        return tuple(sorted(overlap, key=lambda n: -overlap[n])[:top])
