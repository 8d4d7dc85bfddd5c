"""The roofline of each op: FLOPs, bytes, achieved rates, its own bound, and how near its roof.

Rows group the GPU work of the function's calls by the op that launched it and the shapes
it was called with (``aten::mm`` on 8192×4096 · 4096×50257 is one row); host-to-device and
device-to-host copies are rows of their own, by direction and memory kind. Each row's bound:

- ``transfer``: a copy over the host link (PCIe, NVLink-C2C), against the link's bandwidth;
- ``latency``: kernels shorter than ``LATENCY_US`` on average, or with fewer blocks than the
  GPU has SMs while shorter than ``SMALL_GRID_US``: fixed per-kernel cost, not math or bytes,
  decides;
- ``compute``: arithmetic intensity (FLOPs ÷ bytes) at or above the ridge point of its dtype;
- ``memory``: below the ridge, or bytes but no FLOPs (elementwise, normalization, copies);
- ``unknown``: neither FLOPs nor bytes are known (no shapes recorded, a custom kernel).

Efficiency is the achieved rate over the row's roof: the dtype's matmul peak, HBM bandwidth,
or the link's bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import msgspec

from kernelscope.analysis.flops import (
    ATTENTION,
    CONVOLUTIONS,
    MATMULS,
    MATVECS,
    REDUCTIONS,
    OpCosts,
)
from kernelscope.analysis.peaks import Peaks
from kernelscope.analysis.trace_model import USER_ANNOTATION, GpuEvent, Op, Trace

LATENCY_US = 5.0
SMALL_GRID_US = 20.0
NORMALIZATION = frozenset(
    f"aten::{n}"
    for n in (
        "batch_norm",
        "native_batch_norm",
        "_batch_norm_impl_index",
        "cudnn_batch_norm",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training",
        "layer_norm",
        "native_layer_norm",
        "group_norm",
        "native_group_norm",
        "rms_norm",
        "_fused_rms_norm",
        "instance_norm",
        "native_batch_norm_backward",
        "native_layer_norm_backward",
        "cudnn_batch_norm_backward",
        "native_group_norm_backward",
        "softmax",
        "_softmax",
        "_softmax_backward_data",
        "log_softmax",
        "_log_softmax",
    )
)
COPIES = frozenset({"aten::copy_", "aten::_to_copy", "aten::contiguous", "aten::clone"})


class OpRoof(msgspec.Struct):
    """One row of the roofline: an op and its shapes, per step (µs, FLOPs, bytes)."""

    name: str
    kind: str
    """gemm, gemv, conv, attention, norm, reduction, elementwise, copy, transfer, graph, other."""
    bound: str
    gpu_us_per_step: float
    share: float
    """Of the calls' GPU time."""
    calls_per_step: float
    kernels_per_step: float
    mean_kernel_us: float
    shapes: str = ""
    dtype: str | None = None
    flops_per_step: float | None = None
    bytes_per_step: float | None = None
    achieved_tflops: float | None = None
    achieved_gbps: float | None = None
    intensity: float | None = None
    roof: str = ""
    efficiency: float | None = None
    kernel: str = ""
    """The row's costliest kernel (or copy), as evidence; never matched on."""
    grid_blocks: int | None = None
    strides: str = ""
    op_index: int = -1
    """One of the row's ops (its position in the trace's ops), to find its source line."""
    measured: bool = False
    """FLOPs and bytes from hardware counters (``--counters``), not from the model."""
    sm_pct: float | None = None
    """Measured: % of the SMs' speed of light, kernels weighted by duration."""
    memory_pct: float | None = None
    """Measured: % of the memory system's speed of light."""
    occupancy_pct: float | None = None
    """Measured: achieved occupancy (% of the warps an SM holds)."""


class BoundShare(msgspec.Struct):
    """The share of the calls' GPU time in rows of one bound, and their time-weighted
    efficiency against their own roofs."""

    bound: str
    share: float
    gpu_us_per_step: float
    efficiency: float | None = None


@dataclass
class _Row:
    owner: Op | None
    name: str
    kind: str
    us: float = 0.0
    kernels: int = 0
    kernel_us: float = 0.0
    top_kernel: str = ""
    top_kernel_us: float = 0.0
    grid: int | None = None
    bytes_moved: float = 0.0
    flops: float = 0.0
    op_indexes: set[int] | None = None


def roofline(
    trace: Trace,
    events: list[GpuEvent],
    steps: int,
    peaks: Peaks | None,
    costs: OpCosts,
    sm_count: int | None = None,
) -> list[OpRoof]:
    """The rows for the calls' GPU ``events``, costliest first."""
    rows = _rows(trace, events, costs)
    total = sum(r.us for r in rows.values()) or 1.0
    out = [_roof(trace, r, steps, total, peaks, costs, sm_count) for r in rows.values()]
    out.sort(key=lambda r: -r.gpu_us_per_step)
    return out


def bound_shares(rows: list[OpRoof]) -> list[BoundShare]:
    """GPU time per bound, largest share first."""
    acc: dict[str, list[float]] = {}
    for r in rows:
        us, weighted, weight = acc.setdefault(r.bound, [0.0, 0.0, 0.0])
        acc[r.bound] = [
            us + r.gpu_us_per_step,
            weighted + (r.efficiency or 0.0) * r.gpu_us_per_step,
            weight + (r.gpu_us_per_step if r.efficiency is not None else 0.0),
        ]
    total = sum(v[0] for v in acc.values()) or 1.0
    out = [
        BoundShare(bound, us / total, us, weighted / weight if weight else None)
        for bound, (us, weighted, weight) in acc.items()
    ]
    out.sort(key=lambda b: -b.share)
    return out


def is_transfer(event: GpuEvent) -> bool:
    """A copy over the host link: host to device, device to host, or peer to peer."""
    name = event.name
    return event.cat == "gpu_memcpy" and ("HtoD" in name or "DtoH" in name or "PtoP" in name)


def kind_of(name: str) -> str:
    """The family an op belongs to, for reading the table."""
    if name in MATMULS:
        return "gemm"
    if name in MATVECS:
        return "gemv"
    if name in CONVOLUTIONS or name.startswith("aten::convolution"):
        return "conv"
    if name in ATTENTION or "attention" in name:
        return "attention"
    if name in NORMALIZATION or "norm" in name.rpartition("::")[2]:
        return "norm"
    if name in REDUCTIONS:
        return "reduction"
    if name in COPIES:
        return "copy"
    if name.startswith(("aten::", "triton_")):
        return "elementwise"
    return "other"


def _rows(trace: Trace, events: list[GpuEvent], costs: OpCosts) -> dict[object, _Row]:
    """The events grouped into rows: by the op that owns them (a graph replay's: its
    launch) and that op's signature (``OpCosts.signatures``); copies over the host link by
    their name. FLOPs and bytes are summed over each row's ops."""
    ops = trace.ops
    rows: dict[object, _Row] = {}
    kernels: list[GpuEvent] = []
    for g in events:
        if g.cat == "gpu_memcpy" and is_transfer(g):
            key: object = ("transfer", g.name)
            row = rows.get(key)
            if row is None:
                row = rows[key] = _Row(None, g.name, "transfer")
            row.bytes_moved += g.bytes
            _add(row, g)
        elif g.op < 0:
            key = ("kernel", g.name)
            row = rows.get(key)
            if row is None:
                row = rows[key] = _Row(None, g.name, "other")
            _add(row, g)
        else:
            kernels.append(g)
    replays = {i for i in {g.op for g in kernels} if ops[i].cat == USER_ANNOTATION}
    # per owner: [GPU µs, kernels, kernel µs, its longest event]
    acc: dict[int, list[Any]] = {}
    for g in kernels:
        owner = g.launch if g.op in replays and g.launch >= 0 else g.op
        dur = g.dur
        a = acc.get(owner)
        is_kernel = g.cat == "kernel"
        if a is None:
            acc[owner] = [dur, 1 if is_kernel else 0, dur if is_kernel else 0.0, g]
            continue
        a[0] += dur
        if is_kernel:
            a[1] += 1
            a[2] += dur
        if dur > a[3].dur:
            a[3] = g
    unique = [ops[i] for i in acc]
    signatures = costs.signatures(unique) or [bytes(op.args) for op in unique]
    each = costs.many(unique)
    for op, signature, cost in zip(unique, signatures, each, strict=True):
        key = (op.name, signature)
        row = rows.get(key)
        if row is None:
            kind = "graph" if "GraphLaunch" in op.name else kind_of(op.name)
            row = rows[key] = _Row(op, op.name, kind, op_indexes=set())
        assert row.op_indexes is not None
        i = op.index
        gpu_us, n, n_us, g = acc[i]
        row.op_indexes.add(i)
        row.us += gpu_us
        row.kernels += n
        row.kernel_us += n_us
        row.flops += cost.flops
        row.bytes_moved += cost.bytes
        if g.dur > row.top_kernel_us:
            row.top_kernel, row.top_kernel_us = g.name, g.dur
            row.grid = _grid_blocks(g) if g.cat == "kernel" else None
    return rows


def _add(row: _Row, g: GpuEvent) -> None:
    row.us += g.dur
    if g.cat == "kernel":
        row.kernels += 1
        row.kernel_us += g.dur
    if g.dur > row.top_kernel_us:
        row.top_kernel, row.top_kernel_us = g.name, g.dur
        row.grid = _grid_blocks(g) if g.cat == "kernel" else None


class _Grid(msgspec.Struct):
    grid: list[int] = []


_GRID = msgspec.json.Decoder(_Grid)


def _grid_blocks(g: GpuEvent) -> int | None:
    try:
        grid = _GRID.decode(g.args).grid
    except msgspec.MsgspecError:
        return None
    if not grid:
        return None
    n = 1
    for d in grid:
        n *= max(int(d), 1)
    return n


def _roof(
    trace: Trace,
    row: _Row,
    steps: int,
    total_us: float,
    peaks: Peaks | None,
    costs: OpCosts,
    sm_count: int | None,
) -> OpRoof:
    us = row.us / steps
    n_calls = len(row.op_indexes) if row.op_indexes else 0
    out = OpRoof(
        name=row.name,
        kind=row.kind,
        bound="unknown",
        gpu_us_per_step=us,
        share=row.us / total_us,
        calls_per_step=n_calls / steps,
        kernels_per_step=row.kernels / steps,
        mean_kernel_us=row.kernel_us / row.kernels if row.kernels else 0.0,
        kernel=row.top_kernel,
        grid_blocks=row.grid,
        op_index=row.owner.index if row.owner is not None else -1,
    )
    if row.kind == "transfer":
        out.bytes_per_step = row.bytes_moved / steps
        out.achieved_gbps = row.bytes_moved / row.us / 1e3 if row.us > 0 else None
        out.bound = "transfer"
        if peaks and peaks.link_gbps and out.achieved_gbps is not None:
            out.roof = f"{peaks.link} {peaks.link_gbps:.0f} GB/s"
            out.efficiency = out.achieved_gbps / peaks.link_gbps
        return out
    owner = row.owner
    if owner is not None and row.op_indexes:
        cost = costs(owner)
        inputs = owner.inputs()
        out.shapes = _fmt_shapes(inputs.dims)
        out.dtype = cost.dtype or (inputs.types[0] if inputs.types else None)
        out.strides = _strides(owner)
        flops, moved = row.flops, row.bytes_moved
        if flops > 0:
            out.flops_per_step = flops / steps
            out.achieved_tflops = flops / row.us / 1e6 if row.us > 0 else None
        if moved > 0:
            out.bytes_per_step = moved / steps
            out.achieved_gbps = moved / row.us / 1e3 if row.us > 0 else None
        if flops > 0 and moved > 0:
            out.intensity = flops / moved
    small_grid = (
        row.grid is not None and sm_count is not None and row.grid < sm_count
    ) and out.mean_kernel_us < SMALL_GRID_US
    if row.kernels and (out.mean_kernel_us < LATENCY_US or small_grid):
        out.bound = "latency"
        return out
    _bound(out, peaks)
    return out


def _bound(out: OpRoof, peaks: Peaks | None) -> None:
    """Compute or memory, and the efficiency against that roof, from the row's rates."""
    peak_tflops = peaks.tflops_for(out.dtype or "c10::BFloat16") if peaks else 0.0
    if peaks and out.dtype == "float" and (out.achieved_tflops or 0.0) > 1.1 * peak_tflops:
        peak_tflops = peaks.tf32_tflops  # faster than plain fp32 can go: TF32 tensor cores
        out.dtype = "tf32"
    ridge = peak_tflops * 1e12 / (peaks.hbm_gbps * 1e9) if peaks and peaks.hbm_gbps > 0 else 200.0
    if out.achieved_tflops is not None and (out.intensity is None or out.intensity >= ridge):
        out.bound = "compute"
        if peak_tflops:
            out.roof = f"{_dtype_label(out.dtype)} {peak_tflops:.0f} TFLOP/s"
            out.efficiency = out.achieved_tflops / peak_tflops
    elif out.achieved_gbps is not None or out.kind in ("elementwise", "norm", "reduction", "copy"):
        out.bound = "memory"
        if peaks and out.achieved_gbps is not None:
            out.roof = f"HBM {peaks.hbm_gbps / 1000:.2f} TB/s"
            out.efficiency = out.achieved_gbps / peaks.hbm_gbps


def measured_roof(out: OpRoof, flops: float, moved: float, peaks: Peaks | None) -> None:
    """A row's FLOPs and bytes per step replaced by those measured on one call (a step is one
    call), its rates, intensity, bound and efficiency recomputed; a latency row stays one."""
    us = out.gpu_us_per_step
    out.measured = True
    out.flops_per_step = flops or None
    out.bytes_per_step = moved or None
    out.achieved_tflops = flops / us / 1e6 if flops and us > 0 else None
    out.achieved_gbps = moved / us / 1e3 if moved and us > 0 else None
    out.intensity = flops / moved if flops and moved else None
    out.roof, out.efficiency = "", None
    if out.bound != "latency":
        out.bound = "unknown"
        _bound(out, peaks)


def _fmt_shapes(dims: list[object]) -> str:
    shapes = [cast("list[object]", d) for d in dims if isinstance(d, list) and d]
    return " · ".join("×".join(map(str, s)) for s in shapes[:3])


class _Strides(msgspec.Struct):
    strides: list[object] = msgspec.field(default_factory=list[object], name="Input Strides")


_STRIDES = msgspec.json.Decoder(_Strides)


def _strides(op: Op) -> str:
    try:
        strides = _STRIDES.decode(op.args).strides
    except msgspec.MsgspecError:
        return ""
    shapes = [cast("list[object]", s) for s in strides if isinstance(s, list) and s]
    return " · ".join(",".join(map(str, s)) for s in shapes[:3])


def _dtype_label(dtype: str | None) -> str:
    d = (dtype or "").lower()
    for key, label in (("float8", "fp8"), ("bfloat16", "bf16"), ("half", "fp16")):
        if key in d:
            return label
    return "fp32" if d in ("float", "") else d
