"""A memory regression between two runs' memory passes: the peak, and the lines whose hold
on it moved. Allocations repeat exactly from run to run, so a small move is a real one."""

from __future__ import annotations

import msgspec

from kernelscope.protocol import MemoryPass

#: A peak that grew by this share and this many bytes is a regression.
GROWTH_SHARE, GROWTH_MIN_BYTES = 0.02, 1 << 20


class MemoryLineDelta(msgspec.Struct):
    """One line's bytes live at the peak, before and after (forward and backward summed)."""

    path: str
    line: int
    before_bytes: int
    after_bytes: int


class MemoryDelta(msgspec.Struct):
    """The peak before and after, whether it grew beyond the threshold, and the lines."""

    peak_before_bytes: int
    peak_after_bytes: int
    change: float
    regression: bool
    lines: list[MemoryLineDelta] = []


def memory_delta(a: MemoryPass | None, b: MemoryPass | None) -> MemoryDelta | None:
    """How b's memory pass differs from a's; None unless both measured."""
    if a is None or b is None or a.error or b.error:
        return None
    before, after = a.peak_allocated_bytes, b.peak_allocated_bytes
    change = (after - before) / before if before > 0 else 0.0
    grew = after - before
    moved = [
        MemoryLineDelta(path, line, held_a.get((path, line), 0), held_b.get((path, line), 0))
        for held_a, held_b in [(_held(a), _held(b))]
        for path, line in sorted({*held_a, *held_b})
        if abs(held_b.get((path, line), 0) - held_a.get((path, line), 0))
        >= max(GROWTH_MIN_BYTES, GROWTH_SHARE * max(before, after))
    ]
    moved.sort(key=lambda d: -abs(d.after_bytes - d.before_bytes))
    regression = grew >= GROWTH_MIN_BYTES and change > GROWTH_SHARE
    return MemoryDelta(before, after, change, regression, moved)


def _held(m: MemoryPass) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for row in m.lines:
        if row.path:
            key = (row.path, row.line)
            out[key] = out.get(key, 0) + row.live_at_peak_bytes
    return out
