"""The verdict: what bounds the calls, with the numbers behind it.

The verdict is decided in this order (thresholds documented in docs/findings.md):

1. no GPU work in the calls → ``host``;
2. the GPU is busy less than ``BUSY_OVERHEAD`` (50 %) of the call → ``overhead``: the host
   (Python, dispatch, launches, syncs) is what the call waits on. The share is of the
   *unprofiled* call time when the sidecar has it, since the profiler inflates host time
   up to 2×. A raw trace has no unprofiled time: its busy share is cross-checked against
   the launch queue and against host time deflated by the profiler's measured inflation
   before it is called overhead-bound, and the verdict says which evidence decided;
3. otherwise the per-op roofline (``roofline.py``) decides, weighted by GPU time: copies
   over the host link take ``TRANSFER_SHARE`` or more → ``transfer``; kernels too short to
   fill the GPU take ``LATENCY_SHARE`` or more → ``overhead``; compute-bound ops take
   ``DOMINANT_SHARE`` or more → ``compute``; memory-bound ones → ``memory``; else ``mixed``,
   naming the top contributors. Without shapes (``record_shapes=False``) intensity is
   unknown and the verdict is ``memory``, saying so.
"""

from __future__ import annotations

import msgspec

from kernelscope.analysis.peaks import Peaks
from kernelscope.analysis.roofline import BoundShare, OpRoof, bound_shares
from kernelscope.analysis.timeline import Timeline
from kernelscope.protocol import Sidecar
from kernelscope.units import fmt_bytes
from kernelscope.units import fmt_us as fmt

BUSY_OVERHEAD = 0.5


TRANSFER_SHARE = 0.5


LATENCY_SHARE = 0.5


DOMINANT_SHARE = 0.6


#: How much the profiler inflates host time (a @ b + c at n=64 on an H200: 23.7 µs
#: unprofiled, 37.8 µs profiled, 47.6 µs with stacks and shapes), used to estimate a raw
#: trace's unprofiled busy share.
PROFILER_INFLATION = 1.6


PROFILER_INFLATION_STACKS = 2.0


DEFAULT_RIDGE = 200.0  # FLOP/byte, when the device is not in the table (H100/H200: 200-295)


class Verdict(msgspec.Struct):
    """overhead | memory | compute | host, with the numbers behind it."""

    bound: str
    summary: str
    gpu_busy_fraction: float | None = None
    gpu_busy_fraction_unprofiled: float | None = None
    gpu_us_per_step: float = 0.0
    wall_us_per_step: float = 0.0
    kernels_per_step: float = 0.0
    mean_kernel_us: float | None = None
    mean_launch_us: float | None = None
    median_queue_us: float | None = None
    flops_per_step: float | None = None
    bytes_per_step: float | None = None
    achieved_tflops: float | None = None
    achieved_gbps: float | None = None
    peak_tflops: float | None = None
    peak_gbps: float | None = None
    arithmetic_intensity: float | None = None
    ridge_point: float | None = None
    matmul_dtype: str | None = None
    peaks_source: str | None = None
    device: str | None = None
    breakdown: list[BoundShare] = []
    """The calls' GPU time by the bound of the ops that spent it (the per-op roofline)."""
    busy_evidence: str | None = None
    """What decided whether a busy share under 50 % means overhead-bound (raw traces)."""
    cuda_us_per_step: float = 0.0
    """Kernel + memcpy + memset time of the calls per step (overlap counted twice)."""


def verdict_of(
    tl: Timeline,
    sidecar: Sidecar | None,
    flops: float | None,
    moved: float | None,
    peaks: Peaks | None,
    matmul_gpu: dict[str, float],
    cpu_per_step: float,
    device: str | None,
    rows: list[OpRoof],
    stacks: bool,
) -> Verdict:
    steps = tl.steps
    gpu = tl.busy_us / steps
    wall = tl.wall_us / steps
    v = Verdict(
        bound="host",
        summary="",
        gpu_busy_fraction=tl.busy_fraction,
        gpu_us_per_step=gpu,
        wall_us_per_step=wall,
        kernels_per_step=tl.kernels / steps,
        mean_kernel_us=tl.kernel_us / tl.kernels if tl.kernels else None,
        mean_launch_us=tl.mean_launch_us,
        median_queue_us=tl.median_queue_us,
        flops_per_step=flops,
        bytes_per_step=moved,
        device=device,
        breakdown=bound_shares(rows),
        cuda_us_per_step=tl.kernel_us / steps,
    )
    if not tl.events:
        v.summary = f"host-bound: no GPU work; {fmt(cpu_per_step)} of CPU per step"
        t = sidecar.timing if sidecar else None
        if t is not None and t.reps > 0 and t.us_per_call > 0:  # the profiler's is inflated
            v.summary = (
                f"host-bound: no GPU work; {fmt(t.us_per_call)} per step unprofiled "
                f"({fmt(cpu_per_step)} of CPU profiled)"
            )
        return v
    if sidecar and sidecar.timing.method == "cuda_events" and sidecar.timing.us_per_call > 0:
        v.gpu_busy_fraction_unprofiled = min(1.0, gpu / sidecar.timing.us_per_call)
    busy = v.gpu_busy_fraction_unprofiled or v.gpu_busy_fraction or 0.0
    dtype = max(matmul_gpu, key=lambda k: matmul_gpu[k]) if matmul_gpu else None
    v.matmul_dtype = dtype
    if flops and gpu > 0:
        v.achieved_tflops = flops / gpu / 1e6
    if moved and gpu > 0:
        v.achieved_gbps = moved / gpu / 1e3
    if flops and moved:
        v.arithmetic_intensity = flops / moved
    if peaks:
        v.peak_tflops = peaks.tflops_for(dtype or "c10::BFloat16")
        v.peak_gbps = peaks.hbm_gbps
        v.peaks_source = peaks.source
        v.ridge_point = (
            (v.peak_tflops * 1e12) / (peaks.hbm_gbps * 1e9)
            if v.peak_tflops and peaks.hbm_gbps > 0
            else None
        )
    shares = {b.bound: b for b in v.breakdown}
    share = {k: b.share for k, b in shares.items()}
    if busy < BUSY_OVERHEAD and _overhead(v, tl, busy, cpu_per_step, stacks):
        v.bound = "overhead"
        launch = (
            f" against ~{fmt(v.mean_launch_us)} of host time per launch" if v.mean_launch_us else ""
        )
        v.summary = (
            f"overhead-bound: the GPU is busy {busy:.0%} of the call ({fmt(gpu)} of GPU work per "
            f"step); {v.kernels_per_step:g} kernels per step averaging {fmt(v.mean_kernel_us)}"
            f"{launch}"
        )
    elif share.get("transfer", 0.0) >= TRANSFER_SHARE:
        v.bound = "transfer"
        v.summary = f"transfer-bound: GPU busy {busy:.0%}; " + _transfer_text(rows, peaks)
    elif share.get("latency", 0.0) >= LATENCY_SHARE:
        v.bound = "overhead"
        small = [r for r in rows if r.bound == "latency"]
        kernels = sum(r.kernels_per_step for r in small)
        v.summary = (
            f"overhead-bound: {share['latency']:.0%} of GPU time is {kernels:g} kernels per "
            f"step too small to fill the GPU (mean {fmt(_mean_kernel(small))}): fixed "
            "per-kernel cost, not math or bandwidth, decides"
        )
    elif share.get("unknown", 0.0) > 1 - DOMINANT_SHARE:
        # too much GPU time of unknown cost for the breakdown to decide: the function's
        # aggregate intensity does, as far as it is known
        compute = v.arithmetic_intensity is not None and v.arithmetic_intensity >= (
            v.ridge_point or DEFAULT_RIDGE
        )
        v.bound = "compute" if compute else "memory"
        v.summary = f"{v.bound}-bound: GPU busy {busy:.0%}; " + (
            _rate(v, "tflops" if compute else "gbps")
            if v.achieved_gbps or v.achieved_tflops
            else "intensity unknown (shapes not recorded)"
        )
    elif share.get("compute", 0.0) >= DOMINANT_SHARE:
        v.bound = "compute"
        v.summary = f"compute-bound: GPU busy {busy:.0%}; " + _rate(v, "tflops")
    elif share.get("memory", 0.0) >= DOMINANT_SHARE:
        v.bound = "memory"
        v.summary = f"memory-bound: GPU busy {busy:.0%}; " + (
            _rate(v, "gbps") if v.achieved_gbps else "intensity unknown (shapes not recorded)"
        )
    else:
        v.bound = "mixed"
        top = ", ".join(f"{r.name} {r.share:.0%}" for r in rows[:3])
        v.summary = f"mixed: GPU busy {busy:.0%}; top ops {top}"
    parts = breakdown_text(v.breakdown)
    if parts and v.bound in ("compute", "memory", "mixed"):
        v.summary += f"; GPU time {parts}"
    if v.busy_evidence:
        v.summary += f" ({v.busy_evidence})"
    return v


def _overhead(v: Verdict, tl: Timeline, busy: float, cpu_per_step: float, stacks: bool) -> bool:
    """Whether a busy share under 50 % means overhead-bound. With an unprofiled timing it
    does. A raw trace's host time is the profiler's: a deep launch queue, or a busy share
    of 50 % or more once host time is deflated by the profiler's inflation, says the GPU,
    not the host, is what the call waits on; ``v.busy_evidence`` says which decided."""
    if v.gpu_busy_fraction_unprofiled is not None:
        return True
    queue, kernel = tl.median_queue_us, v.mean_kernel_us
    if queue is not None and kernel and queue > max(1000.0, 3 * kernel):
        v.busy_evidence = (
            f"busy {busy:.0%} under the profiler, but kernels wait {fmt(queue)} in the launch "
            "queue: the GPU is saturated"
        )
        return False
    factor = PROFILER_INFLATION_STACKS if stacks else PROFILER_INFLATION
    gpu = tl.busy_us / tl.steps
    estimate = gpu / max(gpu, cpu_per_step / factor) if cpu_per_step > 0 else busy
    how = f"the call's host time ÷ {factor:g}, the profiler's inflation" + (
        " with stacks" if stacks else ""
    )
    if estimate >= BUSY_OVERHEAD:
        v.busy_evidence = (
            f"busy {busy:.0%} under the profiler, ~{estimate:.0%} without it ({how}): no "
            "unprofiled timing in a raw trace"
        )
        return False
    v.busy_evidence = f"busy {busy:.0%} under the profiler, ~{estimate:.0%} without it ({how})"
    return True


def breakdown_text(breakdown: list[BoundShare]) -> str:
    """ "57 % memory-bound at 80 % of bandwidth, 36 % compute-bound at 31 % of peak, 7 %
    other", largest first; empty when one bound has it all."""
    if not breakdown or breakdown[0].share >= 0.995:
        return ""
    roofs = {"compute": "of peak", "memory": "of bandwidth", "transfer": "of the link"}
    parts: list[str] = []
    other = 0.0
    for b in breakdown:
        if b.bound in roofs and b.share >= 0.03:
            at = f" at {b.efficiency:.0%} {roofs[b.bound]}" if b.efficiency is not None else ""
            parts.append(f"{b.share:.0%} {b.bound}-bound{at}")
        elif b.bound == "latency" and b.share >= 0.03:
            parts.append(f"{b.share:.0%} in kernels too small to fill the GPU")
        else:
            other += b.share
    if other >= 0.01:
        parts.append(f"{other:.0%} other")
    return ", ".join(parts)


def _mean_kernel(rows: list[OpRoof]) -> float:
    n = sum(r.kernels_per_step for r in rows)
    return sum(r.gpu_us_per_step for r in rows) / n if n else 0.0


def _transfer_text(rows: list[OpRoof], peaks: Peaks | None) -> str:
    copies = [r for r in rows if r.bound == "transfer"]
    share = sum(r.share for r in copies)
    moved = sum(r.bytes_per_step or 0.0 for r in copies)
    us = sum(r.gpu_us_per_step for r in copies)
    rate = moved / us / 1e3 if us > 0 else 0.0
    link = (
        f" = {rate / peaks.link_gbps:.0%} of the {peaks.link} link ({peaks.link_gbps:.0f} GB/s)"
        if peaks and peaks.link_gbps
        else ""
    )
    kinds = ", ".join(r.name for r in copies[:2])
    return (
        f"{share:.0%} of GPU time is host↔device copies ({kinds}): {fmt_bytes(moved)} per "
        f"step at {rate:.1f} GB/s{link}"
    )


def _rate(v: Verdict, which: str) -> str:
    ai = (
        f"; intensity {v.arithmetic_intensity:.0f} FLOP/B"
        f" vs ridge {v.ridge_point or DEFAULT_RIDGE:.0f}"
        if v.arithmetic_intensity is not None
        else ""
    )
    source = "measured" if v.peaks_source == "calibrated" else "datasheet"
    if which == "tflops" and v.achieved_tflops is not None:
        peak = (
            f" = {v.achieved_tflops / v.peak_tflops:.0%} of the {source} peak ({v.peak_tflops:.0f})"
            if v.peak_tflops
            else ""
        )
        return f"{v.achieved_tflops:.0f} TFLOP/s{peak}{ai}"
    if v.achieved_gbps is not None:
        peak = (
            f" = {v.achieved_gbps / v.peak_gbps:.0%} of the {source} bandwidth "
            f"({v.peak_gbps / 1000:.2f} TB/s)"
            if v.peak_gbps
            else ""
        )
        return f"{v.achieved_gbps / 1000:.2f} TB/s{peak}{ai}"
    return ai.lstrip("; ")
