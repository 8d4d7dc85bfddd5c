"""A user's Triton kernels in the roofline: bytes from the tensors each launch was passed
(the worker's ``launches``), since the trace records no shapes for them; FLOPs only from
counters. Pure: no torch."""

from __future__ import annotations

from collections.abc import Sequence

from kernelscope.analysis.peaks import Peaks
from kernelscope.analysis.roofline import OpRoof, recost
from kernelscope.protocol import KernelLaunch
from kernelscope.units import fmt_bytes


def apply_launches(
    rows: list[OpRoof], launches: Sequence[KernelLaunch], peaks: Peaks | None
) -> None:
    """Give each row named after a launched kernel (a row of its own: no aten op launched
    it; or one per kernel of a CUDA-graph replay) its tensors' bytes per launch times its
    launches per step, and rate it. The bytes count each tensor
    once: a kernel that touches part of one moves less, so a rate above the roof leaves the
    row unrated rather than over 100 %."""
    by_name = {k.name: k for k in launches if k.bytes_per_launch > 0}
    if not by_name:
        return
    for r in rows:
        k = by_name.get(r.name)
        if k is None or r.kernels_per_step <= 0 or r.measured:
            continue
        moved = k.bytes_per_launch * r.kernels_per_step
        r.kind = "custom"  # the user's, though its name may read as Inductor's (triton_…)
        r.estimate = "launch"
        r.footprint = k.bytes_per_launch
        r.shapes = r.shapes or (
            f"{k.tensors} tensor{'s' if k.tensors != 1 else ''} passed, "
            f"{fmt_bytes(k.bytes_per_launch)} per launch"
        )
        recost(r, r.flops_per_step or 0.0, moved, peaks)
        if r.efficiency is not None and r.efficiency > 1.0:
            r.efficiency, r.roof = None, ""
