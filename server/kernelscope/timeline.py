"""The GPU's timeline over the active steps: busy time, idle gaps, and the launch queue."""

from __future__ import annotations

import heapq
import statistics
from dataclasses import dataclass, field
from itertools import pairwise

from kernelscope.trace_model import GpuEvent, Op, Trace


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
    gaps: list[Gap] = field(default_factory=list[Gap])
    queue_us: list[float] = field(default_factory=list[float])
    launch_us: list[float] = field(default_factory=list[float])
    streams: int = 0
    devices: int = 0

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
    launches = trace.launches
    ops = trace.ops
    events = sorted(
        (g for g in trace.gpu_events if g.dur > 0 and _in_window(g, ops, bounds)),
        key=lambda g: g.ts,
    )
    end = max([bounds[1], *(g.end for g in events)])
    window = (bounds[0], end)
    merged = _merge(events)
    busy = sum(b - a for a, b in merged)
    holes = [(a, b) for a, b in _holes(merged, window) if b - a >= min_gap_us]
    gaps = [
        Gap(a, b, names) for (a, b), names in zip(holes, _host_ops_in(trace, holes), strict=True)
    ]
    queue = [g.ts - ops[g.launch].ts for g in events if g.launch >= 0 and g.cat == "kernel"]
    launch_cost = [op.dur for op in launches if "Launch" in op.name and bounds[0] <= op.ts <= end]
    return Timeline(
        window=window,
        steps=steps,
        events=events,
        busy_us=busy,
        kernel_us=sum(g.dur for g in events),
        kernels=sum(1 for g in events if g.cat == "kernel"),
        gaps=gaps,
        queue_us=queue,
        launch_us=launch_cost,
        streams=len({(g.device, g.stream) for g in events}),
        devices=len({g.device for g in events}),
    )


def _in_window(g: GpuEvent, ops: list[Op], bounds: tuple[float, float]) -> bool:
    """Launched inside the window (by its launch's time), else started inside it."""
    t = ops[g.launch].ts if g.launch >= 0 else g.ts
    return bounds[0] <= t <= bounds[1]


def _merge(events: list[GpuEvent]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for g in events:
        if out and g.ts <= out[-1][1]:
            if g.end > out[-1][1]:
                out[-1] = (out[-1][0], g.end)
        else:
            out.append((g.ts, g.end))
    return out


def _holes(
    merged: list[tuple[float, float]], window: tuple[float, float]
) -> list[tuple[float, float]]:
    """Idle intervals between busy ones (not before the first or after the last)."""
    holes: list[tuple[float, float]] = []
    for (_, a_end), (b_start, _) in pairwise(merged):
        lo, hi = max(a_end, window[0]), min(b_start, window[1])
        if hi > lo:
            holes.append((lo, hi))
    return holes


def _host_ops_in(
    trace: Trace, holes: list[tuple[float, float]], top: int = 3
) -> list[tuple[str, ...]]:
    """For each hole (sorted, disjoint), the names of the outermost aten ops overlapping it,
    longest overlap first. One sweep: each op enters a heap once, when the holes reach its
    start, and leaves it once it ends before a hole."""
    ops = trace.ops
    outer = sorted(
        (op for op in trace.cpu_ops if op.parent < 0 or ops[op.parent].cat != "cpu_op"),
        key=lambda op: op.ts,
    )
    open_ops: list[tuple[float, int]] = []  # (end, position in outer)
    nxt = 0
    out: list[tuple[str, ...]] = []
    for start, end in holes:
        while nxt < len(outer) and outer[nxt].ts < end:
            heapq.heappush(open_ops, (outer[nxt].end, nxt))
            nxt += 1
        while open_ops and open_ops[0][0] <= start:
            heapq.heappop(open_ops)
        overlap: dict[str, float] = {}
        for k in sorted(k for _, k in open_ops):  # in time order, as ties are broken
            op = outer[k]
            o = min(op.end, end) - max(op.ts, start)
            if o > 0:
                overlap[op.name] = overlap.get(op.name, 0.0) + o
        out.append(tuple(sorted(overlap, key=lambda n: -overlap[n])[:top]))
    return out
