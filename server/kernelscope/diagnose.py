"""Trace (+ sidecar) → verdict and findings. Pure: no LSP, no torch.

The verdict is decided in this order (thresholds documented in docs/findings.md):

1. no GPU work in the window → ``host``;
2. the GPU is busy less than ``BUSY_OVERHEAD`` (50 %) of the call → ``overhead``: the host
   (Python, dispatch, launches, syncs) is what the call waits on. The share is of the
   *unprofiled* call time when the sidecar has it, since the profiler inflates host time
   up to 2×; else of the profiled step window;
3. otherwise the roofline decides: arithmetic intensity (FLOPs ÷ bytes moved) at or above the
   device's ridge point (peak FLOP/s ÷ peak bytes/s) → ``compute``, below → ``memory``.
   Without shapes (``record_shapes=False``) the intensity is unknown and the verdict is
   ``memory``, saying so.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property, reduce
from itertools import compress
from operator import add, attrgetter
from pathlib import Path

import msgspec

from kernelscope.findings import Finding
from kernelscope.flops import FLOP_OPS, MATMULS, OpCosts
from kernelscope.peaks import Peaks, peaks_for
from kernelscope.protocol import Sidecar
from kernelscope.timeline import Timeline, build_timeline
from kernelscope.trace_model import Op, Trace, load_trace
from kernelscope.units import fmt_us as fmt

BUSY_OVERHEAD = 0.5
CALL_RANGE = "ks:call"  # the worker's record_function around each call of the function
SYNC_CALLS = ("Synchronize", "cudaMemcpy", "cuMemcpyDtoH", "hipMemcpy")
_NAME = attrgetter("name")
_TS = attrgetter("ts")
_BYTES = attrgetter("bytes")
_FLOPS = attrgetter("flops")
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


class Analysis(msgspec.Struct):
    """Everything the analyses found in one trace."""

    verdict: Verdict
    findings: list[Finding]
    entry_to_first_kernel_us: float | None
    steps: int
    warnings: list[str] = []


@dataclass(frozen=True)
class Options:
    """Knobs of the analyses."""

    min_gap_us: float = 20.0
    max_sync_findings: int = 10
    peaks: Peaks | None = None
    peaks_cache: Path | None = None


@dataclass
class Facts:
    """What the finders read: the trace, the sidecar, and the numbers derived once."""

    trace: Trace
    sidecar: Sidecar | None
    timeline: Timeline
    verdict: Verdict
    function_path: str | None
    function_line: int | None
    cold_trace: Trace | None = None
    cpu_us_per_step: float = 0.0
    matmul_gpu_us: dict[str, float] = field(default_factory=dict[str, float])
    marked_calls: bool = False
    """Whether the trace marks the function's calls (``ks:call`` ranges)."""
    costs: OpCosts = field(default_factory=OpCosts)
    """FLOPs and bytes of ops, memoized for the analysis."""

    @cached_property
    def own_syncs(self) -> list[Op]:
        """The runtime calls that block the host until the device catches up (see
        ``is_sync``) made inside one of the function's calls (under a ``ks:call`` range;
        anywhere when the calls are not marked), in time order."""
        launches = self.trace.launches
        names = {name for name in set(map(_NAME, launches)) if is_sync(name)}
        syncs = [op for op in launches if op.name in names] if names else []
        if not self.marked_calls:
            return syncs
        ops = self.trace.ops
        own: list[Op] = []
        for op in syncs:
            i = op.parent
            while i >= 0:
                parent = ops[i]
                if parent.name == CALL_RANGE:
                    own.append(op)
                    break
                i = parent.parent
        return own


Finder = Callable[[Facts, Options], Iterable[Finding]]


def analyze(
    trace: Trace,
    sidecar: Sidecar | None = None,
    options: Options | None = None,
    function_path: str | None = None,
    cold_trace: Trace | None = None,
) -> Analysis:
    """Run every analysis on one trace; the sidecar adds FLOPs, lines and the cold call."""
    from kernelscope.finders import DEFAULT_FINDERS

    options = options or Options()
    timeline = build_timeline(trace, options.min_gap_us)
    facts = _facts(trace, sidecar, timeline, options, function_path, cold_trace)
    findings = [f for finder in DEFAULT_FINDERS for f in finder(facts, options)]
    entry = first_kernel_delay(cold_trace) if cold_trace is not None else first_kernel_delay(trace)
    return Analysis(facts.verdict, findings, entry, timeline.steps, list(trace.warnings))


def analyze_file(
    path: str | Path, sidecar_path: str | Path | None = None, options: Options | None = None
) -> Analysis:
    """Load a trace (and its sidecar) and analyze it; raises TraceError or SidecarError."""
    trace = load_trace(path)
    sidecar = load_sidecar(sidecar_path) if sidecar_path else None
    return analyze(trace, sidecar, options)


class SidecarError(Exception):
    """The sidecar file cannot be read."""


def load_sidecar(path: str | Path) -> Sidecar:
    """A worker sidecar written beside a trace."""
    try:
        return msgspec.json.decode(Path(path).read_bytes(), type=Sidecar)
    except OSError as e:
        raise SidecarError(f"cannot read {path}: {e.strerror or e}") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise SidecarError(f"{path} is not a kernelscope sidecar: {e}") from None


def first_kernel_delay(trace: Trace) -> float | None:
    """µs from the start of the first region (first step, else first top-level annotation,
    else first op) to the first GPU work launched inside it."""
    if trace.steps:
        start, end = trace.steps[0].ts, trace.steps[0].end
    else:
        tops = [a for a in trace.user_annotations if a.parent < 0]
        first = tops[0] if tops else (trace.ops[0] if trace.ops else None)
        if first is None:
            return None
        start, end = first.ts, first.end
    ops = trace.ops
    events = trace.gpu_events  # sorted by ts: the first that qualifies is the earliest
    for i in range(bisect_left(events, start, key=_TS), len(events)):
        g = events[i]
        if g.launch < 0 or start <= ops[g.launch].ts <= end:
            return g.ts - start
    return None


def _facts(
    trace: Trace,
    sidecar: Sidecar | None,
    timeline: Timeline,
    options: Options,
    function_path: str | None,
    cold_trace: Trace | None,
) -> Facts:
    steps = timeline.steps
    ops = trace.ops
    gpu_by_op: dict[int, float] = {}
    for g in timeline.events:
        if g.op >= 0:
            gpu_by_op[g.op] = gpu_by_op.get(g.op, 0.0) + g.dur
    order = sorted(gpu_by_op)
    launching = [ops[index] for index in order]
    names = list(map(_NAME, launching))
    costs = OpCosts()
    op_costs = costs.many(launching)
    # summed in op order, as one loop would: the same float sums
    total_bytes = reduce(add, map(_BYTES, op_costs), 0.0)
    trace_flops = reduce(
        add, compress(map(_FLOPS, op_costs), map(FLOP_OPS.__contains__, names)), 0.0
    )
    matmul_gpu: dict[str, float] = {}
    for i in compress(range(len(names)), map(MATMULS.__contains__, names)):
        dtype = op_costs[i].dtype or "?"
        matmul_gpu[dtype] = matmul_gpu.get(dtype, 0.0) + gpu_by_op[order[i]]
    side_flops = sum(r.flops for r in sidecar.key_averages) if sidecar else 0.0
    flops = (side_flops or trace_flops) / steps if (side_flops or trace_flops) else None
    moved = total_bytes / steps if total_bytes else None
    calls = [a.dur for a in trace.user_annotations if a.name == CALL_RANGE]
    cpu_per_step = (sum(calls) if calls else sum(s.dur for s in trace.steps)) / steps
    device = _device_name(trace, sidecar)
    peaks = options.peaks or (
        peaks_for(device, _total_memory(trace), options.peaks_cache) if device else None
    )
    verdict = _verdict(timeline, sidecar, flops, moved, peaks, matmul_gpu, cpu_per_step, device)
    return Facts(
        trace=trace,
        sidecar=sidecar,
        timeline=timeline,
        verdict=verdict,
        function_path=function_path,
        function_line=sidecar.function_line if sidecar else None,
        cold_trace=cold_trace,
        cpu_us_per_step=cpu_per_step,
        matmul_gpu_us=matmul_gpu,
        marked_calls=bool(calls),
        costs=costs,
    )


def is_sync(name: str) -> bool:
    """Whether a runtime call of this name blocks the host until the device catches up."""
    return any(key in name for key in SYNC_CALLS) and "Async" not in name


def _device_name(trace: Trace, sidecar: Sidecar | None) -> str | None:
    if sidecar and sidecar.device_type == "cuda":
        return sidecar.device_name
    for props in trace.device_properties:
        name = props.get("name")
        if isinstance(name, str):
            return name
    return None


def _total_memory(trace: Trace) -> int | None:
    for props in trace.device_properties:
        mem = props.get("totalGlobalMem")
        if isinstance(mem, int):
            return mem
    return None


def _verdict(
    tl: Timeline,
    sidecar: Sidecar | None,
    flops: float | None,
    moved: float | None,
    peaks: Peaks | None,
    matmul_gpu: dict[str, float],
    cpu_per_step: float,
    device: str | None,
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
    )
    if not tl.events:
        v.summary = f"host-bound: no GPU work; {fmt(cpu_per_step)} of CPU per step"
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
    ridge = v.ridge_point or DEFAULT_RIDGE
    if busy < BUSY_OVERHEAD:
        v.bound = "overhead"
        launch = (
            f" against ~{fmt(v.mean_launch_us)} of host time per launch" if v.mean_launch_us else ""
        )
        v.summary = (
            f"overhead-bound: the GPU is busy {busy:.0%} of the call ({fmt(gpu)} of GPU work per "
            f"step); {v.kernels_per_step:g} kernels per step averaging {fmt(v.mean_kernel_us)}"
            f"{launch}"
        )
    elif v.arithmetic_intensity is not None and v.arithmetic_intensity >= ridge:
        v.bound = "compute"
        v.summary = f"compute-bound: GPU busy {busy:.0%}; " + _rate(v, "tflops")
    else:
        v.bound = "memory"
        v.summary = f"memory-bound: GPU busy {busy:.0%}; " + (
            _rate(v, "gbps") if v.achieved_gbps else "intensity unknown (shapes not recorded)"
        )
    return v


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
