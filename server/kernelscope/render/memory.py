"""The memory pass and the batch forecast as text: the peak, what holds it by kind and by
line, the churn per line, and which batch sizes fit."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from kernelscope.columns import table
from kernelscope.protocol import MemoryLine, MemoryPass
from kernelscope.units import fmt_bytes, fmt_us

if TYPE_CHECKING:  # the language server loads this module at start: no analysis imports
    from kernelscope.analysis.memory_diff import MemoryDelta
    from kernelscope.analysis.memory_fit import Forecast

KIND_ORDER = ("parameters", "gradients", "optimizer_state", "activations", "temporaries", "other")


def where(row: MemoryLine) -> str:
    """``train.py:42 (backward)``, or what made it when no line of the user's did."""
    if not row.path:
        return f"({row.via})"
    return f"{_short(row.path)}:{row.line}" + (f" ({row.via})" if row.via else "")


def kinds_line(kinds: dict[str, int]) -> str:
    """``parameters 2.0 MiB · activations 64.0 KiB``, in a fixed order, zero kinds left out."""
    order = [k for k in KIND_ORDER if kinds.get(k)] + sorted(set(kinds) - set(KIND_ORDER))
    return " · ".join(f"{k.replace('_', ' ')} {fmt_bytes(kinds[k])}" for k in order if kinds[k])


def memory_section(m: MemoryPass, max_lines: int = 8) -> list[str]:
    """The report's memory section."""
    if m.error:
        return [f"memory pass failed: {m.error}"]
    reserved = ""
    if m.peak_reserved_bytes is not None:
        reserved = f" · reserved {fmt_bytes(m.peak_reserved_bytes)}"
    out = [
        f"memory pass ({m.source}, one warm call of {fmt_us(m.call_us)})",
        f"  peak      {fmt_bytes(m.peak_allocated_bytes)} allocated{reserved}, "
        f"{fmt_us(m.peak_at_us)} into the call",
        f"  before    {fmt_bytes(m.baseline_bytes)} held before the call; at the peak "
        f"{fmt_bytes(m.baseline_at_peak_bytes)} of it: {kinds_line(m.baseline_kinds) or '-'}",
        f"  the call  {kinds_line(m.kinds_at_peak) or '-'} live at the peak",
    ]
    if m.kinds_after_call:
        out.append(f"  after     {kinds_line(m.kinds_after_call)} held when the call returned")
    unused = m.reserved_unused_at_peak_bytes
    if unused is not None:
        out.append(f"  reserve   {fmt_bytes(unused)} reserved but unused at the peak")
    if m.device_allocs is not None:
        out.append(
            f"  allocator {m.device_allocs} device allocations, {m.device_frees or 0} frees "
            "in the call (num_device_alloc / num_device_free)"
        )
    heavy = sorted(
        (r for r in m.lines if r.live_at_peak_bytes), key=lambda r: -r.live_at_peak_bytes
    )
    heavy = heavy[:max_lines]
    if heavy:
        out += ["", "  held at the peak, by line"]
        out += _indent(
            table(
                ["line", "at peak", "kinds"],
                [[where(r), fmt_bytes(r.live_at_peak_bytes), kinds_line(r.kinds)] for r in heavy],
                align="lrl",
            )
        )
    busy = sorted((r for r in m.lines if r.allocated_bytes), key=lambda r: -r.allocated_bytes)
    if busy:
        out += ["", "  allocated and freed in the call, by line (churn)"]
        out += _indent(
            table(
                ["line", "allocated", "freed", "allocations", "device allocs"],
                [
                    [
                        where(r),
                        fmt_bytes(r.allocated_bytes),
                        fmt_bytes(r.freed_bytes),
                        str(r.allocations),
                        str(r.device_allocs) if m.device_allocs is not None else "-",
                    ]
                    for r in busy[:max_lines]
                ],
                align="lrrrr",
            )
        )
    if m.truncated:
        out.append(f"  the history kept only its last {m.entries} entries: figures are partial")
    out += [f"  approximate: {a}" for a in m.approximate]
    return out


def oom_section(m: MemoryPass, max_lines: int = 6) -> list[str]:
    """What was live when the call ran out of memory (run again with the history on)."""
    request = f", asking for {fmt_bytes(m.oom_request_bytes)}" if m.oom_request_bytes else ""
    free = f" with {fmt_bytes(m.free_bytes)} free on the device" if m.free_bytes else ""
    out = [
        f"memory at the failure: {fmt_bytes(m.trace_peak_bytes)} allocated{request}{free}",
        f"  held before the call {fmt_bytes(m.baseline_bytes)}: "
        f"{kinds_line(m.baseline_kinds) or '-'}",
    ]
    heavy = sorted(
        (r for r in m.lines if r.live_at_peak_bytes), key=lambda r: -r.live_at_peak_bytes
    )
    out += [
        f"  {where(r)}  {fmt_bytes(r.live_at_peak_bytes)}  {kinds_line(r.kinds)}"
        for r in heavy[:max_lines]
    ]
    return out


def render_forecast(f: Forecast) -> str:
    """`kernelscope memory`: the peaks measured per batch size, the fit, what fits."""
    out = [f"{f.qualname} on {f.device}: peak {f.measure} by batch size"]
    out += _indent(
        table(
            ["batch", "peak", "source"],
            [[str(p.batch_size), fmt_bytes(p.peak_bytes), p.how] for p in f.points],
            align="rrl",
        )
    )
    if f.fit is not None:
        out.append(
            f"fit          {fmt_bytes(f.fit.fixed_bytes)} + {fmt_bytes(f.fit.per_item_bytes)} "
            f"per item (largest misfit {f.fit.max_error:.1%})"
        )
    if f.model:
        out.append(f"model        {f.model}")
    if f.not_linear:
        out.append(f"not linear   {f.not_linear}")
    if f.free_bytes is not None and f.budget_bytes is not None:
        out.append(
            f"room         {fmt_bytes(f.free_bytes)} free for the call, less {f.headroom:.0%} "
            f"headroom: {fmt_bytes(f.budget_bytes)}"
        )
    if f.largest_batch is not None and f.predicted is not None:
        predicted = fmt_bytes(f.predicted)
        out.append(f"forecast     batch {f.largest_batch} fits (predicted {predicted})")
    if f.asked_batch is not None:
        out.append(f"asked        {will_it_fit(f, with_check=False)}")
    if f.check is not None:
        out.append(f"checked      {f.check}")
    out += [f"note         {n}" for n in f.notes]
    return "\n".join(out)


def will_it_fit(f: Forecast, with_check: bool = True) -> str:
    """The answer to "Will batch N fit?" in one line (with the checking run's outcome)."""
    n = f.asked_batch
    if f.asked_predicted is None:
        return f"batch {n}: no forecast ({'; '.join(f.notes) or 'no fit'})"
    predicted = fmt_bytes(f.asked_predicted)
    if f.asked_fits is None or f.budget_bytes is None:
        return f"batch {n}: predicted peak {predicted} (the room is unknown)"
    verdict = "fits" if f.asked_fits else "does not fit"
    largest = f" (largest that fits: {f.largest_batch})" if f.largest_batch is not None else ""
    checked = f"; checked: {f.check}" if f.check and with_check else ""
    return (
        f"batch {n} {verdict}: predicted peak {predicted} of {fmt_bytes(f.budget_bytes)} "
        f"(the room less {f.headroom:.0%} headroom){largest}{checked}"
    )


def _indent(rows: list[str]) -> list[str]:
    return ["  " + r for r in rows]


def rows_on(m: MemoryPass, path: str, line: int) -> list[MemoryLine]:
    """The memory pass's rows of one line (its forward and its backward)."""
    return [r for r in m.lines if r.path == path and r.line == line]


def peak_share(m: MemoryPass, path: str, line: int) -> float:
    """The share of the peak a line holds (forward and backward together)."""
    peak = m.trace_peak_bytes or m.peak_allocated_bytes
    held = sum(r.live_at_peak_bytes for r in rows_on(m, path, line))
    return held / peak if peak > 0 else 0.0


def line_memory_text(m: MemoryPass, path: str, line: int) -> list[str]:
    """What a line holds at the peak and allocates per call, one sentence per row."""
    out: list[str] = []
    for r in rows_on(m, path, line):
        whose = "its backward" if r.via == "backward" else "it"
        held = ""
        if r.live_at_peak_bytes:
            share = peak_share(m, path, line) if len(rows_on(m, path, line)) == 1 else None
            of = f" ({share:.0%} of the peak)" if share is not None else ""
            held = f"holds {fmt_bytes(r.live_at_peak_bytes)} at the memory peak{of}: "
            held += f"{kinds_line(r.kinds)}; "
        out.append(
            f"{whose} {held}allocates {fmt_bytes(r.allocated_bytes)} per call in "
            f"{r.allocations} allocations, frees {fmt_bytes(r.freed_bytes)}"
        )
    return out


def memory_summary(m: MemoryPass) -> str:
    """The function's one-line memory figure."""
    if m.error:
        return f"the memory pass failed: {m.error}"
    reserved = f" ({fmt_bytes(m.peak_reserved_bytes)} reserved)" if m.peak_reserved_bytes else ""
    return (
        f"peak {fmt_bytes(m.peak_allocated_bytes)} allocated{reserved}, "
        f"{fmt_bytes(m.baseline_bytes)} of it held before the call"
    )


def memory_delta_lines(m: MemoryDelta) -> list[str]:
    """The memory peak before and after, and the lines whose hold on it moved."""
    verdict = "a memory regression" if m.regression else "no regression"
    out = [
        f"memory    peak {fmt_bytes(m.peak_before_bytes)} → {fmt_bytes(m.peak_after_bytes)} "
        f"({m.change:+.1%}): {verdict}"
    ]
    for d in m.lines[:8]:
        out.append(
            f"  {_short(d.path)}:{d.line}  {fmt_bytes(d.before_bytes)} → "
            f"{fmt_bytes(d.after_bytes)} at the peak"
        )
    return out


def _short(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return rel if len(rel) < len(path) else path
