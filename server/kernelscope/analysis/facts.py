"""What the checks read: the trace, the sidecar and the numbers derived once (timeline,
roofline, verdict); the analyses' options."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter
from pathlib import Path

from kernelscope.analysis.block_masks import apply_block_masks
from kernelscope.analysis.calls import CALL_RANGE, Calls
from kernelscope.analysis.costs import MATMULS, OpCosts
from kernelscope.analysis.costs.foreach import gradient_lists
from kernelscope.analysis.counters import apply_counters
from kernelscope.analysis.cpu_families import cpu_families
from kernelscope.analysis.data_pipeline import (
    LoaderTime,
    loader_time,
    pipeline_bound,
    pipeline_summary,
)
from kernelscope.analysis.launches import apply_launches
from kernelscope.analysis.ops import op_table
from kernelscope.analysis.peaks import Peaks, peaks_for
from kernelscope.analysis.roofline import OpRoof, roofline
from kernelscope.analysis.timeline import Timeline
from kernelscope.analysis.trace_model import Op, Trace
from kernelscope.analysis.verdict import Verdict, verdict_of
from kernelscope.findings import Finding
from kernelscope.protocol import Sidecar

SYNC_CALLS = ("Synchronize", "cudaMemcpy", "cuMemcpyDtoH", "hipMemcpy")


_NAME = attrgetter("name")


_TS = attrgetter("ts")


@dataclass(frozen=True)
class Options:
    """Knobs of the analyses."""

    min_gap_us: float = 20.0
    max_sync_findings: int = 10
    peaks: Peaks | None = None
    peaks_cache: Path | None = None


@dataclass
class Facts:
    """What the checks read: the trace, the sidecar, and the numbers derived once."""

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
    calls: Calls | None = None
    """The calls' windows (None: the whole trace)."""
    costs: OpCosts = field(default_factory=OpCosts)
    """FLOPs and bytes of ops, memoized for the analysis."""
    roofline: list[OpRoof] = field(default_factory=list[OpRoof])
    sm_count: int | None = None
    """The GPU's multiprocessors, from the sidecar or the trace's deviceProperties."""
    loader: LoaderTime | None = None
    """The DataLoader's ``next()`` inside the calls, when one ran there."""
    cpu_families: list[tuple[str, float]] = field(default_factory=list[tuple[str, float]])
    """A host-only call's ops' CPU time by family (cpu_families.py); empty otherwise."""

    @cached_property
    def own_syncs(self) -> list[Op]:
        """The runtime calls that block the host until the device catches up (see
        ``is_sync``) made inside one of the function's calls (under a ``ks:call`` range;
        when the calls are not marked, inside a call's window), in time order. So the
        profiler's own sync is left out: ``prof.step()`` at the end of its window
        synchronizes the device after the last step, in no call."""
        launches = self.trace.launches
        names = {name for name in set(map(_NAME, launches)) if is_sync(name)}
        syncs = [op for op in launches if op.name in names] if names else []
        if not self.marked_calls:
            calls = self.calls
            return syncs if calls is None else [op for op in syncs if calls.index_of(op.ts) >= 0]
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


Check = Callable[[Facts, Options], Iterable[Finding]]


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


def facts_of(
    trace: Trace,
    sidecar: Sidecar | None,
    timeline: Timeline,
    options: Options,
    function_path: str | None,
    cold_trace: Trace | None,
    calls: Calls,
) -> Facts:
    steps = timeline.steps
    device = _device_name(trace, sidecar)
    peaks = options.peaks or (
        peaks_for(device, _total_memory(trace), options.peaks_cache) if device else None
    )
    costs = OpCosts()
    sm_count = _sm_count(trace, sidecar)
    lists = [
        (o.tensors, o.elements, o.chunks, o.dtype)
        for o in (sidecar.optimizer_lists if sidecar is not None else [])
        if o.device.startswith("cuda")
    ]
    if not lists and trace.steps:  # a raw trace: the gradients the first step accumulated
        lists = gradient_lists(trace.cpu_ops, trace.steps[0].ts, trace.steps[0].end)
    rows = roofline(trace, timeline.events, steps, peaks, costs, sm_count, lists)
    if sidecar is not None and sidecar.launches:
        apply_launches(rows, sidecar.launches, peaks)
    if sidecar is not None and sidecar.block_masks:
        apply_block_masks(trace, rows, sidecar.block_masks, peaks)
    if sidecar is not None and sidecar.counters is not None and sidecar.counters.kernels:
        apply_counters(trace, timeline.events, steps, rows, sidecar.counters, costs, peaks)
    matmul_gpu: dict[str, float] = {}
    for r in rows:
        if r.name in MATMULS:
            dtype = r.dtype or "?"
            matmul_gpu[dtype] = matmul_gpu.get(dtype, 0.0) + r.gpu_us_per_step * steps
    trace_flops = sum(r.flops_per_step or 0.0 for r in rows)
    flops = trace_flops or None
    # a row of no cost model shows its guess but does not weigh in the verdict's totals
    moved = (
        sum(
            r.bytes_per_step or 0.0
            for r in rows
            if r.bound != "transfer" and r.estimate != "unreliable"
        )
        or None
    )
    cpu_per_step = calls.host_us / steps
    stacks = trace.frames_seen > 0
    verdict = verdict_of(
        timeline, sidecar, flops, moved, peaks, matmul_gpu, cpu_per_step, device, rows, stacks
    )
    loader = loader_time(trace, calls, steps, sidecar.timing if sidecar is not None else None)
    if loader is not None and verdict.bound == "overhead" and pipeline_bound(loader, "overhead"):
        busy = verdict.gpu_busy_fraction_unprofiled or verdict.gpu_busy_fraction
        verdict.summary = pipeline_summary(loader, busy, verdict.gpu_us_per_step)
    families: list[tuple[str, float]] = []
    if verdict.bound == "host":
        families = cpu_families(op_table(trace, calls=calls))
        if families:
            parts = ", ".join(f"{family} {share:.0%}" for family, share in families)
            verdict.summary += f"; the ops' CPU time: {parts}"
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
        marked_calls=calls.marked,
        calls=calls,
        costs=costs,
        roofline=rows,
        sm_count=sm_count,
        loader=loader,
        cpu_families=families,
    )


def _sm_count(trace: Trace, sidecar: Sidecar | None) -> int | None:
    if sidecar and isinstance(sidecar.device_properties.get("multi_processor_count"), int):
        return int(sidecar.device_properties["multi_processor_count"])
    for props in trace.device_properties:
        n = props.get("numSms")
        if isinstance(n, int):
            return n
    return None


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
