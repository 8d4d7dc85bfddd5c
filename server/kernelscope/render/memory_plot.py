"""The memory pass's timeline: a PNG of bytes allocated through the call, and a trace with a
counter track that Perfetto (or chrome://tracing) opens."""

from __future__ import annotations

import itertools
import math
from typing import Any

from kernelscope.protocol import MemoryPass
from kernelscope.render.memory import kinds_line, where
from kernelscope.render.plot import GRID, INK, KNEE, MEASURED, Canvas
from kernelscope.units import fmt_bytes, fmt_us

BASELINE = (150, 150, 150)
MiB = 2**20


def _nice_step(span: float, ticks: int = 5) -> float:
    """A 1-2-5 step that cuts `span` into about `ticks` parts."""
    raw = span / ticks
    e = 10.0 ** math.floor(math.log10(raw))
    return next(m * e for m in (1, 2, 5, 10) if m * e >= raw)


def render_memory_png(m: MemoryPass, title: str = "", width: int = 720, height: int = 440) -> bytes:
    """Bytes allocated against time into the call (a step line), the baseline held before it
    dashed, and the peak marked. ValueError when the pass has no timeline."""
    if not m.timeline:
        raise ValueError("the memory pass has no timeline")
    points = sorted(m.timeline)
    canvas = Canvas(width, height)
    left, right, top, bottom = 92, width - 24, 48, height - 56
    span_us = max(m.call_us, points[-1][0], 1.0)
    top_bytes = max(*(v for _t, v in points), m.peak_allocated_bytes, 1) * 1.1
    unit = MiB if top_bytes < 4096 * MiB else 1024 * MiB
    unit_name = "MIB" if unit == MiB else "GIB"

    def px(t_us: float) -> float:
        return left + max(t_us, 0.0) / span_us * (right - left)

    def py(nbytes: float) -> float:
        return bottom - nbytes / top_bytes * (bottom - top)

    step = _nice_step(top_bytes / unit)
    tick = 0.0
    while tick * unit <= top_bytes:
        canvas.line((left, py(tick * unit)), (right, py(tick * unit)), GRID)
        canvas.text(left - 8, py(tick * unit) - 5, f"{tick:g}", INK, align="right")
        tick += step
    t_step = _nice_step(span_us)
    t = 0.0
    while t <= span_us:
        canvas.line((px(t), top), (px(t), bottom), GRID)
        canvas.text(px(t), bottom + 8, fmt_us(t) if t else "0", INK, align="center")
        t += t_step
    canvas.line((left, top), (left, bottom), INK)
    canvas.line((left, bottom), (right, bottom), INK)
    canvas.line((left, py(m.baseline_bytes)), (right, py(m.baseline_bytes)), BASELINE, 2, dash=8)
    for (t0, v0), (t1, v1) in itertools.pairwise(points):
        canvas.line((px(t0), py(v0)), (px(t1), py(v0)), MEASURED, 2)
        canvas.line((px(t1), py(v0)), (px(t1), py(v1)), MEASURED, 2)
    peak_x, peak_y = px(m.peak_at_us), py(m.trace_peak_bytes or m.peak_allocated_bytes)
    canvas.disc(peak_x, peak_y, 4, KNEE)
    label = f"peak {fmt_bytes(m.peak_allocated_bytes)}"
    canvas.text(peak_x + (8 if peak_x < (left + right) / 2 else -8), peak_y - 14, label, KNEE,
                align="left" if peak_x < (left + right) / 2 else "right")  # fmt: skip
    canvas.text(left, 12, title, INK)
    canvas.text(left - 60, top - 20, f"allocated ({unit_name})", INK)
    canvas.text((left + right) / 2, bottom + 32, "time into the call", INK, align="center")
    canvas.text(right, top - 20, "held before the call", INK, align="right")
    canvas.line((right - 190, top - 15), (right - 162, top - 15), BASELINE, 2, dash=8)
    return canvas.png()


def memory_trace(m: MemoryPass, name: str) -> dict[str, Any]:
    """A Chrome-trace JSON of the memory pass's call: the call as a slice, a counter track
    of bytes allocated (MiB) and reserved at the peak, and the peak as an instant with what
    held it by kind and by line."""
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "kernelscope memory pass"}},
        {"name": name, "ph": "X", "ts": 0.0, "dur": max(m.call_us, 0.0), "pid": 1, "tid": 1,
         "args": {"source": m.source}},
    ]  # fmt: skip
    for t, v in sorted(m.timeline):
        events.append({"name": "allocated", "ph": "C", "ts": t, "pid": 1, "args": {"MiB": v / MiB}})
    heavy = sorted(
        (r for r in m.lines if r.live_at_peak_bytes), key=lambda r: -r.live_at_peak_bytes
    )
    events.append(
        {
            "name": f"peak {fmt_bytes(m.peak_allocated_bytes)}",
            "ph": "i",
            "s": "p",
            "ts": m.peak_at_us,
            "pid": 1,
            "tid": 1,
            "args": {
                "the call, by kind": kinds_line(m.kinds_at_peak),
                "held before the call": kinds_line(m.baseline_kinds),
                "by line": [f"{where(r)} {fmt_bytes(r.live_at_peak_bytes)}" for r in heavy[:12]],
            },
        }
    )
    return {"traceEvents": events, "displayTimeUnit": "ms"}
