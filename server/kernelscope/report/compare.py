"""Two runs side by side: the change of the function's time against the noise both measured,
and what changed under it (ops added or removed, their time and call counts per step, the
lines whose cost moved). Pure over two reports (or trace analyses)."""

from __future__ import annotations

import msgspec

from kernelscope.analysis.memory_diff import MemoryDelta, memory_delta
from kernelscope.report.schema import LineRow, OpRow, Report, TraceAnalysis

#: An op or line whose time per step moved less than this (µs) is not listed.
MIN_DELTA_US = 0.5
#: An op's noise, as a share of its time per step: a move within it (or within the run's own
#: noise, when larger) is not a change. A floor chosen, not measured: an op's time comes from
#: a few profiled steps, and no spread of it is recorded.
OP_NOISE = 0.05


class OpDelta(msgspec.Struct):
    """One op name's time and calls per step, before and after (0 where absent)."""

    name: str
    status: str
    """added | removed | changed (calls per step, or time beyond `noise_us`)."""
    before_us: float
    after_us: float
    calls_before: float
    calls_after: float
    noise_us: float = 0.0
    """The move of its time per step that is noise (`Comparison.op_noise` of the larger
    time, at least MIN_DELTA_US)."""

    @property
    def delta_us(self) -> float:
        """After minus before, per step."""
        return self.after_us - self.before_us


class LineDelta(msgspec.Struct):
    """One source line's cost per call, before and after; matched by its text when it moved."""

    path: str
    line: int
    code: str
    before_us: float
    after_us: float
    moved_from: int | None = None
    """Its line number before, when the same code sits elsewhere now."""
    was: str = ""
    """The line's code before, when it was edited in place."""


class Comparison(msgspec.Struct):
    """B against A: the time per call, the noise, a regression beyond it, and the deltas."""

    before: str
    after: str
    unit: str
    """CUDA (a GPU run: kernel time) or CPU (self CPU time)."""
    time_before_us: float
    time_after_us: float
    change: float
    """(after - before) / before."""
    noise: float
    """The larger half-spread (p10–p90 over the median) of the two timings: a change within
    it is not a change."""
    timed: str
    """Which time: unprofiled per call (both had it) or the ops' per step."""
    regression: bool
    improvement: bool
    ops: list[OpDelta]
    lines: list[LineDelta] = []
    op_noise: float = OP_NOISE
    """The share of an op's time within which it did not change: the larger of OP_NOISE and
    `noise`."""
    ops_within_noise: int = 0
    """Ops in both runs, with the same calls, whose time moved within their noise (not in
    `ops`)."""
    memory: MemoryDelta | None = None
    """The memory passes' peaks and the lines whose hold on it moved (both runs had one)."""


Side = Report | TraceAnalysis


def compare(a: Side, b: Side, before: str = "A", after: str = "B") -> Comparison:
    """How `b` differs from `a`."""
    cuda = _cuda(a) and _cuda(b)
    unit = "CUDA" if cuda else "CPU"
    t0, n0, how0 = _time(a, cuda)
    t1, n1, how1 = _time(b, cuda)
    timed = how0 if how0 == how1 else "ops per step"
    if how0 != how1:
        t0, t1 = _ops_time(a, cuda), _ops_time(b, cuda)
        n0 = n1 = 0.0
    change = (t1 - t0) / t0 if t0 > 0 else 0.0
    noise = max(n0, n1)
    op_noise = max(OP_NOISE, noise)
    ops, within = _ops(a, b, cuda, op_noise)
    return Comparison(
        before=before,
        after=after,
        unit=unit,
        time_before_us=t0,
        time_after_us=t1,
        change=change,
        noise=noise,
        timed=timed,
        regression=change > noise and change > 0.01,
        improvement=-change > noise and change < -0.01,
        ops=ops,
        lines=_lines(a, b) if isinstance(a, Report) and isinstance(b, Report) else [],
        op_noise=op_noise,
        ops_within_noise=within,
        memory=memory_delta(a.memory_pass, b.memory_pass)
        if isinstance(a, Report) and isinstance(b, Report)
        else None,
    )


def _cuda(side: Side) -> bool:
    if isinstance(side, Report):
        return side.device.type == "cuda"
    return any(o.self_cuda_us > 0 for o in side.ops)


def _steps(side: Side) -> int:
    return max(1, side.steps.active if isinstance(side, Report) else side.steps)


def _time(side: Side, cuda: bool) -> tuple[float, float, str]:
    """The function's time per call, its half-spread, and which time it is."""
    if isinstance(side, Report) and side.timing.unprofiled_us_per_call > 0:
        t = side.timing
        spread = 0.0
        if t.unprofiled_p10_us is not None and t.unprofiled_p90_us is not None:
            spread = (t.unprofiled_p90_us - t.unprofiled_p10_us) / 2 / t.unprofiled_us_per_call
        return t.unprofiled_us_per_call, spread, "unprofiled per call"
    return _ops_time(side, cuda), 0.0, "ops per step"


def _ops_time(side: Side, cuda: bool) -> float:
    total = sum(o.self_cuda_us if cuda else o.self_cpu_us for o in side.ops)
    return total / _steps(side)


def _ops(a: Side, b: Side, cuda: bool, op_noise: float) -> tuple[list[OpDelta], int]:
    """The ops added, removed or changed beyond their noise; how many moved within it."""

    def per_step(side: Side) -> dict[str, OpRow]:
        merged: dict[str, OpRow] = {}
        for o in side.ops:  # one row per name (shapes may split a name in some tables)
            m = merged.get(o.name)
            merged[o.name] = (
                o
                if m is None
                else msgspec.structs.replace(
                    m,
                    calls=m.calls + o.calls,
                    self_cpu_us=m.self_cpu_us + o.self_cpu_us,
                    self_cuda_us=m.self_cuda_us + o.self_cuda_us,
                )
            )
        return merged

    sa, sb = _steps(a), _steps(b)
    ra, rb = per_step(a), per_step(b)
    out: list[OpDelta] = []
    within = 0
    for name in ra.keys() | rb.keys():
        x, y = ra.get(name), rb.get(name)
        before = ((x.self_cuda_us if cuda else x.self_cpu_us) / sa) if x else 0.0
        after = ((y.self_cuda_us if cuda else y.self_cpu_us) / sb) if y else 0.0
        status = "added" if x is None else "removed" if y is None else "changed"
        calls_before = x.calls / sa if x else 0.0
        calls_after = y.calls / sb if y else 0.0
        noise_us = max(MIN_DELTA_US, op_noise * max(before, after))
        if status == "changed" and abs(after - before) <= noise_us and calls_before == calls_after:
            within += abs(after - before) >= MIN_DELTA_US  # a move, if within the noise
            continue
        out.append(OpDelta(name, status, before, after, calls_before, calls_after, noise_us))
    out.sort(key=lambda d: abs(d.delta_us), reverse=True)
    return out, within


def _lines(a: Report, b: Report) -> list[LineDelta]:
    cuda = a.device.type == "cuda" and b.device.type == "cuda"

    def cost(r: LineRow) -> float:
        return r.cuda_us if cuda else r.self_cpu_us

    by_line = {(r.path, r.line): r for r in a.lines}
    by_code: dict[tuple[str, str], LineRow] = {}
    for r in a.lines:
        if r.code:
            by_code.setdefault((r.path, r.code), r)
    seen: set[tuple[str, int]] = set()
    out: list[LineDelta] = []
    for r in b.lines:
        here = by_line.get((r.path, r.line))
        old, moved_from, was = here, None, ""
        if here is None or (r.code and here.code and here.code != r.code):
            elsewhere = by_code.get((r.path, r.code)) if r.code else None
            if elsewhere is not None and (elsewhere.path, elsewhere.line) not in seen:
                old, moved_from = elsewhere, elsewhere.line
            elif here is not None:
                was = here.code  # the same line, edited
        if old is not None:
            seen.add((old.path, old.line))
        before = cost(old) if old is not None else 0.0
        if abs(cost(r) - before) >= MIN_DELTA_US or moved_from is not None or was:
            out.append(LineDelta(r.path, r.line, r.code, before, cost(r), moved_from, was))
    for r in a.lines:
        if (r.path, r.line) not in seen and cost(r) >= MIN_DELTA_US:
            out.append(LineDelta(r.path, r.line, r.code, cost(r), 0.0))
    out.sort(key=lambda d: abs(d.after_us - d.before_us), reverse=True)
    return out
