"""The GPU's timeline over the function's calls: busy time, idle gaps, and the launch queue."""

from __future__ import annotations

import heapq
import math
import statistics
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from functools import cached_property
from itertools import accumulate
from operator import add, attrgetter, sub

from kernelscope.analysis.calls import Calls, find_calls, gpu_work
from kernelscope.analysis.trace_model import CPU_OP, GpuEvent, Trace

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
    """GPU work of the function's calls (µs). ``windows`` are the calls' host spans, each
    extended to the end of its GPU work, merged where they overlap; ``window`` spans them."""

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
    windows: list[tuple[float, float]] = field(default_factory=list[tuple[float, float]])
    calls: Calls | None = field(default=None, repr=False, compare=False)

    @property
    def wall_us(self) -> float:
        """Total length of the windows (the calls with their GPU tails)."""
        if not self.windows:
            return self.window[1] - self.window[0]
        return sum(hi - lo for lo, hi in self.windows)

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


def build_timeline(trace: Trace, min_gap_us: float = 20.0, calls: Calls | None = None) -> Timeline:
    """Busy time, idle gaps longer than `min_gap_us`, and queue delays of the GPU work of
    the function's calls (``calls.gpu_work``: attributed by launch, on any thread)."""
    calls = calls if calls is not None else find_calls(trace)
    work = gpu_work(trace, calls)
    events = [g for _, g in work]  # in trace order: sorted by ts
    his = list(calls.ends)
    for i, g in work:
        his[i] = max(his[i], g.ts + g.dur)
    win_starts, win_ends = _merge(list(calls.starts), his)
    windows = list(zip(win_starts, win_ends, strict=True))
    window = (win_starts[0], win_ends[-1]) if windows else (0.0, 0.0)
    starts = list(map(_TS, events))
    ends = list(map(add, starts, map(_DUR, events)))
    merged_starts, merged_ends = _merge(starts, ends)
    busy = sum(map(sub, merged_ends, merged_starts))
    gap_starts, gap_ends = (
        _idle(merged_starts, merged_ends, windows, min_gap_us) if events else ([], [])
    )
    ops = trace.ops
    cats = list(map(_CAT, events))
    queue = [g.ts - ops[g.launch].ts for g in events if g.launch >= 0 and g.cat == "kernel"]
    launch_cost = [
        op.dur
        for op in trace.launches
        if "Launch" in op.name
        and (i := bisect_right(calls.starts, op.ts) - 1) >= 0
        and op.ts <= calls.ends[i]
    ]
    devices = list(map(_DEVICE, events))
    return Timeline(
        window=window,
        steps=max(len(calls), 1),
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
        windows=windows,
        calls=calls,
    )


def _idle(
    starts: list[float],
    ends: list[float],
    windows: list[tuple[float, float]],
    min_gap_us: float,
) -> tuple[list[float], list[float]]:
    """The stretches of at least ``min_gap_us`` inside the windows with no busy interval
    (both sorted and disjoint), as lists of starts and of ends."""
    out_starts: list[float] = []
    out_ends: list[float] = []
    k = 0
    for lo, hi in windows:
        cursor = lo
        while k < len(starts) and starts[k] < hi:
            if starts[k] - cursor >= min_gap_us:
                out_starts.append(cursor)
                out_ends.append(starts[k])
            cursor = max(cursor, ends[k])
            k += 1
        if hi - cursor >= min_gap_us:
            out_starts.append(cursor)
            out_ends.append(hi)
        if k > 0 and ends[k - 1] > hi:  # a busy interval running on past this window
            k -= 1
    return out_starts, out_ends


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
