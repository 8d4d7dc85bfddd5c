"""The roofline of each op: FLOPs, bytes, achieved rates, its own bound, and how near its roof.

Rows group the GPU work of the function's calls by the op that launched it and the shapes
it was called with (``aten::mm`` on 8192×4096 · 4096×50257 is one row); host-to-device and
device-to-host copies are rows of their own, by direction and memory kind. Each row's bound:

- ``transfer``: a copy over the host link (PCIe, NVLink-C2C), against the link's bandwidth;
- ``latency``: kernels shorter than ``LATENCY_US`` on average that reach less than
  ``LATENCY_EFFICIENCY`` of both their roofs (or whose costs are unknown): fixed per-kernel
  cost, not math or bytes, decides. A small grid alone is no reason: a 12 µs GEMV of 128
  blocks streaming 32 MB is bandwidth-bound;
- ``compute``: arithmetic intensity (FLOPs ÷ bytes) at or above the ridge point of its dtype;
- ``memory``: below the ridge, or bytes but no FLOPs (elementwise, normalization, copies);
- ``unknown``: neither FLOPs nor bytes are known (no shapes recorded, a custom kernel).

Efficiency is the achieved rate over the row's roof: the dtype's matmul peak, the link's
bandwidth, or memory bandwidth: L2's where the call ran faster than HBM can feed it (its
bytes are the least it must move, so L2 served part of them; ``footprint_of`` says whether
its working set fits), else HBM's. Bytes come from the op family's model (costs/), or from
the copies' own byte counts where the op's GPU work is memcpys and memsets; an op of no
model gets the generic rule's guess, shown but not rated (``estimate``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import msgspec

from kernelscope.analysis.costs import (
    ATTENTION,
    CONVOLUTIONS,
    MATMULS,
    MATVECS,
    REDUCTIONS,
    OpCosts,
)
from kernelscope.analysis.costs.batch_norm import batch_norm_reread_bytes
from kernelscope.analysis.costs.foreach import (
    MULTI_TENSOR_KERNEL,
    ListSize,
    device_steps,
    foreach_bytes,
    is_multi_tensor_op,
    repeated_lists,
)
from kernelscope.analysis.costs.generated import is_template_matmul
from kernelscope.analysis.costs.lists import CONCATENATIONS, concatenation_bytes
from kernelscope.analysis.costs.movement import MOVEMENT
from kernelscope.analysis.costs.per_op import flops_range, footprint_of, from_inductor, has_model
from kernelscope.analysis.costs.softmax import reread_bytes
from kernelscope.analysis.peaks import Peaks
from kernelscope.analysis.trace_model import USER_ANNOTATION, GpuEvent, Op, Trace
from kernelscope.units import fmt_bytes

LATENCY_US = 5.0
LATENCY_EFFICIENCY = 0.10  # of both roofs
_MAX_BYTES = 2**62  # more than any memory holds: a corrupt count
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


class OpRoof(msgspec.Struct):
    """One row of the roofline: an op and its shapes, per step (µs, FLOPs, bytes)."""

    name: str
    kind: str
    """gemm, gemv, conv, attention, norm, reduction, elementwise, copy, transfer, graph,
    template (an Inductor template kernel), custom (a user's Triton kernel), other."""
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
    flops_low_per_step: float | None = None
    """Where the trace cannot pin FLOPs down (a compiled flex_attention: its block mask's
    density is unknown), the low end; ``flops_per_step`` and the rates are the high end."""
    bytes_per_step: float | None = None
    achieved_tflops: float | None = None
    achieved_gbps: float | None = None
    intensity: float | None = None
    roof: str = ""
    efficiency: float | None = None
    kernel: str = ""
    """The row's costliest kernel (or copy), as evidence; never matched on."""
    grid_blocks: int | None = None
    estimate: str = ""
    """Where the row's bytes and FLOPs come from: "model" (its op family's, costs/),
    "events" (the memcpys' and memsets' own byte counts), "range" (FLOPs between
    ``flops_low_per_step`` and ``flops_per_step``), "mask" (a flex_attention's FLOPs from
    its live block mask's density), "launch" (a user's Triton kernel: the bytes of the
    tensors its launches were passed), "grid" (a multi-tensor kernel's bytes bounded by its
    grid, costs/foreach.py: the rate a bound, not rated where above HBM's), "inductor" (an
    Inductor kernel's bytes, and FLOPs its buffers do not give, from Inductor's own
    estimate, costs/generated.py), "unreliable" (no
    model: the generic rule's guess, shown but not rated against a roof, and left out of the
    verdict's totals); a hardware-counter measurement would say "measured"."""
    footprint: float | None = None
    """Distinct bytes one call touches, which picks the L2 or the HBM roof."""
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
    event_bytes: bool = False
    grid_bytes: bool = False
    """Its bytes are a bound from its kernels' grids (costs/foreach.py)."""


def roofline(
    trace: Trace,
    events: list[GpuEvent],
    steps: int,
    peaks: Peaks | None,
    costs: OpCosts,
    sm_count: int | None = None,
    lists: Sequence[ListSize] = (),
) -> list[OpRoof]:
    """The rows for the calls' GPU ``events``, costliest first (``lists``: the optimizers'
    tensor lists the worker counted, for foreach ops whose shapes the trace left out)."""
    rows = _rows(trace, events, costs, lists)
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
    if name in MOVEMENT:
        return "copy"
    if name.startswith("triton_"):
        return _generated_kind(name)
    if name.startswith("aten::"):
        return "elementwise"
    return "other"


def _generated_kind(name: str) -> str:
    """The family of an Inductor kernel, from its kind prefix (pointwise, reduction,
    persistent reduction, template) and the ops it fused, which its name lists
    (``triton_red_fused__softmax_1``)."""
    fused = name.partition("_fused_")[2]
    if "softmax" in fused or "norm" in fused:
        return "norm"
    if name.startswith(("triton_red_", "triton_per_")):
        return "reduction"
    if is_template_matmul(name):
        return "gemm"
    if name.startswith("triton_tem_"):
        return "template"
    return "elementwise"


def _rows(
    trace: Trace, events: list[GpuEvent], costs: OpCosts, lists: Sequence[ListSize]
) -> dict[object, _Row]:
    """The events grouped into rows: by the op that owns them (a graph replay's: its
    launch) and that op's signature (``OpCosts.signatures``); copies over the host link by
    their name. FLOPs and bytes are summed over each row's ops."""
    ops = trace.ops
    zero_d = device_steps(ops)  # 0-d lists on the device: list_elements keeps its guard
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
    # per owner: [GPU µs, kernels, kernel µs, its longest event, the bytes its memcpys and
    # memsets move (-1 once it launched a kernel), its longest kernel (None before one), the
    # blocks of its multi-tensor kernels]
    acc: dict[int, list[Any]] = {}
    for g in kernels:
        owner = g.op
        if owner in replays and g.launch >= 0:
            launch = ops[g.launch]
            if "GraphLaunch" in launch.name:  # a CUDA-graph replay: a row per kernel
                _add(_replayed(rows, launch, g.name), g)
            else:  # launched by no op, e.g. a user's Triton kernel: a row per kernel
                _add(_launched(rows, launch, g.name), g)
            continue
        dur = g.dur
        a = acc.get(owner)
        is_kernel = g.cat == "kernel"
        if a is None:
            a = acc[owner] = [0.0, 0, 0.0, g, 0.0, None, 0]
        a[0] += dur
        if is_kernel:
            a[1] += 1
            a[2] += dur
            if a[5] is None or dur > a[5].dur:
                a[5] = g
            if MULTI_TENSOR_KERNEL in g.name:
                a[6] += _grid_blocks(g) or 0
        if dur > a[3].dur:
            a[3] = g
        if is_kernel or a[4] < 0 or not 0 <= g.bytes <= _MAX_BYTES:
            a[4] = -1.0  # a kernel, or a byte count no memory holds: the model's bytes
        else:  # a device-to-device memcpy reads and writes its bytes, a memset writes them
            a[4] += g.bytes * (2 if g.cat == "gpu_memcpy" else 1)
    unique = [ops[i] for i in acc]
    signatures = costs.signatures(unique) or [bytes(op.args) for op in unique]
    each = costs.many(unique)
    for op, signature, cost in zip(unique, signatures, each, strict=True):
        key = (op.name, signature)
        row = rows.get(key)
        if row is None:
            kind = kind_of(op.name)
            row = rows[key] = _Row(op, op.name, kind, op_indexes=set())
        assert row.op_indexes is not None
        i = op.index
        gpu_us, n, n_us, g, moved, kernel, blocks = acc[i]
        row.op_indexes.add(i)
        row.us += gpu_us
        row.kernels += n
        row.kernel_us += n_us
        row.flops += cost.flops
        row.event_bytes = moved > 0
        modelled = cost.bytes
        if not modelled and op.name in CONCATENATIONS:  # no dtype in the trace: the kernel's
            modelled = concatenation_bytes(op.inputs(), (kernel or g).name)
        elif is_multi_tensor_op(op.name):  # the generic rule saw only its 0-d tensors
            twice = repeated_lists(ops, op)
            name = (kernel or g).name
            modelled, exact = foreach_bytes(op.inputs(), name, blocks, twice, lists, zero_d)
            row.grid_bytes = row.grid_bytes or not exact
        row.bytes_moved += moved if moved > 0 else modelled
        if g.dur > row.top_kernel_us:
            row.top_kernel, row.top_kernel_us = g.name, g.dur
            row.grid = _grid_blocks(g) if g.cat == "kernel" else None
    return rows


def _replayed(rows: dict[object, _Row], launch: Op, kernel: str) -> _Row:
    """The row of a kernel run by CUDA-graph replays, each launch one call of it."""
    key = ("graph", kernel)
    row = rows.get(key)
    if row is None:
        row = rows[key] = _Row(launch, kernel, "graph", op_indexes=set())
    assert row.op_indexes is not None
    row.op_indexes.add(launch.index)
    return row


def _launched(rows: dict[object, _Row], launch: Op, kernel: str) -> _Row:
    """The row of a kernel launched straight from Python (``cuLaunchKernelEx`` under a
    ``record_function``, no aten op around it), each launch one call of it."""
    key = ("launched", kernel)
    row = rows.get(key)
    if row is None:
        row = rows[key] = _Row(launch, kernel, "other", op_indexes=set())
    assert row.op_indexes is not None
    row.op_indexes.add(launch.index)
    return row


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
        if moved > 0 and not row.event_bytes:  # a generic softmax's or a batch norm's passes
            l2 = peaks.l2_bytes if peaks else 0.0
            again = reread_bytes(owner.name, inputs, row.top_kernel, sm_count, l2)
            again += batch_norm_reread_bytes(owner.name, inputs, row.top_kernel, l2)
            moved += again * len(row.op_indexes)
        if row.event_bytes:
            out.estimate = "events"
        elif (flops > 0 or moved > 0) and from_inductor(owner):
            out.estimate = "inductor"
        elif moved > 0 and row.grid_bytes:
            out.estimate = "grid"
        elif flops > 0 or moved > 0:
            out.estimate = "model" if has_model(owner.name) else "unreliable"
        low = flops_range(owner)
        if low is not None and flops > 0:  # the rates below are the high end's: at most
            out.estimate = "range"
            out.kind = "attention"
            out.flops_low_per_step = low[0] * len(row.op_indexes) / steps
        if moved > 0:
            per_call = (  # each byte once
                row.event_bytes or owner.name in CONCATENATIONS or is_multi_tensor_op(owner.name)
            )
            out.footprint = moved / len(row.op_indexes) if per_call else footprint_of(owner)
        if flops > 0:
            out.flops_per_step = flops / steps
            out.achieved_tflops = flops / row.us / 1e6 if row.us > 0 else None
        if moved > 0:
            out.bytes_per_step = moved / steps
            out.achieved_gbps = moved / row.us / 1e3 if row.us > 0 else None
        if flops > 0 and moved > 0:
            out.intensity = flops / moved
    _bound(out, peaks, row.kernels > 0)
    if out.estimate == "grid" and peaks and (out.achieved_gbps or 0.0) > peaks.hbm_gbps:
        # a bound above HBM's rate is loose (tensors smaller than a chunk, a list read twice
        # such as AdamW's grads in addcmul_), not a sign of L2: not rated
        out.efficiency, out.roof = None, ""
    return out


def _bound(out: OpRoof, peaks: Peaks | None, has_kernels: bool) -> None:
    """Latency, compute or memory, and the efficiency against that roof, from the row's
    rates."""
    peak_tflops = peaks.tflops_for(out.dtype or "c10::BFloat16") if peaks else 0.0
    if peaks and out.dtype == "float" and (out.achieved_tflops or 0.0) > peak_tflops:
        peak_tflops = peaks.tf32_tflops  # faster than plain fp32 can go: TF32 tensor cores
        out.dtype = "tf32"
    ridge = peak_tflops * 1e12 / (peaks.hbm_gbps * 1e9) if peaks and peaks.hbm_gbps > 0 else 200.0
    bandwidth, memory_roof = _memory_roof(peaks, out.footprint, out.achieved_gbps or 0.0)
    if has_kernels and out.mean_kernel_us < LATENCY_US:
        compute_share = (
            out.achieved_tflops / peak_tflops if out.achieved_tflops and peak_tflops else 0.0
        )
        memory_share = out.achieved_gbps / bandwidth if out.achieved_gbps and bandwidth else 0.0
        if max(compute_share, memory_share) < LATENCY_EFFICIENCY:
            out.bound = "latency"
            return
    rated = out.estimate != "unreliable"
    if out.achieved_tflops is not None and (out.intensity is None or out.intensity >= ridge):
        out.bound = "compute"
        if peak_tflops:
            out.roof = f"{_dtype_label(out.dtype)} {peak_tflops:.0f} TFLOP/s"
            out.efficiency = out.achieved_tflops / peak_tflops
    elif out.achieved_gbps is not None or out.kind in ("elementwise", "norm", "reduction", "copy"):
        out.bound = "memory"
        if bandwidth and out.achieved_gbps is not None and rated:
            out.roof = memory_roof
            out.efficiency = out.achieved_gbps / bandwidth


def rerate(out: OpRoof, peaks: Peaks | None) -> None:
    """A row's bound and efficiency worked out again from its rates, by the same rules."""
    out.roof, out.efficiency, out.bound = "", None, "unknown"
    _bound(out, peaks, out.kernels_per_step > 0)


def measured_roof(out: OpRoof, flops: float, moved: float, peaks: Peaks | None) -> None:
    """A row's FLOPs and bytes per step replaced by those measured on one call (a step is one
    call), its rates, intensity, bound and efficiency recomputed by the same rules."""
    out.measured = True
    out.estimate = "measured"
    recost(out, flops, moved, peaks)


def recost(out: OpRoof, flops: float, moved: float, peaks: Peaks | None) -> None:
    """A row's FLOPs and bytes per step set (0: none), its rates, intensity, bound and
    efficiency worked out again from them by the same rules."""
    us = out.gpu_us_per_step
    out.flops_per_step = flops or None
    out.flops_low_per_step = None
    out.bytes_per_step = moved or None
    out.achieved_tflops = flops / us / 1e6 if flops and us > 0 else None
    out.achieved_gbps = moved / us / 1e3 if moved and us > 0 else None
    out.intensity = flops / moved if flops and moved else None
    rerate(out, peaks)


def _memory_roof(peaks: Peaks | None, footprint: float | None, gbps: float) -> tuple[float, str]:
    """The bandwidth (GB/s) that bounds a call touching ``footprint`` bytes at ``gbps``, and
    its label. A row's bytes are the least the kernel must move, so a rate above HBM's means
    L2 served part of them (a working set that fits L2, written by the kernel before, or one
    partly still there): its roof is L2's, where the device's L2 bandwidth is known. Else
    HBM's: a working set that fits L2 but was read from HBM (weights read once per step)
    keeps HBM's roof."""
    if peaks is None:
        return 0.0, ""
    if peaks.l2_gbps > 0 and gbps > peaks.hbm_gbps:
        fits = footprint is not None and 0 < footprint <= peaks.l2_bytes
        held = f"working set {fmt_bytes(footprint)}" if footprint else "working set unknown"
        label = f"L2 {peaks.l2_gbps / 1000:.1f} TB/s ({held}{'' if fits else ', partly in L2'})"
        return peaks.l2_gbps, label
    return peaks.hbm_gbps, f"HBM {peaks.hbm_gbps / 1000:.2f} TB/s"


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
