"""Compiled flex_attention's FLOPs from its block mask's density: the worker reads each live
BlockMask's ``sparsity()`` after the cold call (the sidecar's ``block_masks``); a trace alone
gives a range (one KV block per query block up to the dense count). Pure: no torch."""

from __future__ import annotations

from collections.abc import Sequence

from kernelscope.analysis.costs.attention import flex_block_grids
from kernelscope.analysis.costs.tensors import tensors
from kernelscope.analysis.peaks import Peaks
from kernelscope.analysis.roofline import OpRoof, recost
from kernelscope.analysis.trace_model import Trace
from kernelscope.protocol import BlockMaskDensity


def mask_grid(mask: BlockMaskDensity) -> tuple[int, int] | None:
    """A mask's (query blocks, KV blocks): its lengths over its block size, rounded up."""
    if len(mask.shape) != 4 or len(mask.block_size) != 2 or min(mask.block_size) <= 0:
        return None
    (q, kv), (bq, bkv) = mask.shape[2:], mask.block_size
    return -(-q // bq), -(-kv // bkv)


def apply_block_masks(
    trace: Trace, rows: list[OpRoof], masks: Sequence[BlockMaskDensity], peaks: Peaks | None
) -> None:
    """Each flex_attention row whose FLOPs are a range, and whose block grid one live mask
    (or several of one density) has: its FLOPs are the dense count times the mask's share of
    computed blocks (a partly masked block is computed whole), its rates and bound again."""
    densities: dict[tuple[int, int], set[float]] = {}
    for m in masks:
        grid = mask_grid(m)
        if grid is not None and 0.0 <= m.sparsity <= 100.0:
            densities.setdefault(grid, set()).add(round(1.0 - m.sparsity / 100.0, 6))
    if not densities:
        return
    for r in rows:
        if r.estimate != "range" or r.op_index < 0 or not r.flops_per_step:
            continue
        grids = flex_block_grids(tensors(trace.ops[r.op_index].inputs()))
        found = {d for g in grids for d in densities.get(g, ())}
        if len(found) != 1:
            continue  # no live mask of its grid, or masks of two densities: the range stays
        r.estimate = "mask"
        recost(r, r.flops_per_step * found.pop(), r.bytes_per_step or 0.0, peaks)
