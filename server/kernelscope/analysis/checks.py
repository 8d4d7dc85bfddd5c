"""The checks: ``find_<problem>(facts, options) -> Iterable[Finding]``, in their default order.

Each reads the Facts built once (facts.py) and yields Findings with a stable code; every
code is documented in docs/findings.md. Empty input gives no findings.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, cast

import msgspec

from kernelscope.analysis.calls import COLD_RANGE, forward_op
from kernelscope.analysis.facts import Check, Facts, Options
from kernelscope.analysis.flops import MATMULS
from kernelscope.analysis.memory_findings import find_memory
from kernelscope.analysis.roofline import OpRoof
from kernelscope.analysis.syncs import NO_PLACE, find_sync_points, has_syncs, python_places
from kernelscope.analysis.trace_model import Op, Trace
from kernelscope.analysis.verdict import BUSY_OVERHEAD
from kernelscope.findings import Code, Finding, Severity
from kernelscope.units import cut, fmt_bytes
from kernelscope.units import fmt_us as fmt

POINTWISE = frozenset(
    f"aten::{name}"
    for base in (
        "add",
        "sub",
        "mul",
        "div",
        "cos",
        "sin",
        "tan",
        "exp",
        "exp2",
        "log",
        "log1p",
        "tanh",
        "sigmoid",
        "relu",
        "gelu",
        "silu",
        "neg",
        "abs",
        "pow",
        "sqrt",
        "rsqrt",
        "clamp",
        "clamp_min",
        "clamp_max",
        "where",
        "masked_fill",
        "threshold",
        "leaky_relu",
        "hardtanh",
        "erf",
        "reciprocal",
        "maximum",
        "minimum",
        "lerp",
        "addcmul",
        "addcdiv",
        "sign",
        "floor",
        "ceil",
        "round",
        "square",
        "logical_not",
        "eq",
        "ne",
        "gt",
        "lt",
        "ge",
        "le",
    )
    for name in (base, base + "_")
)


def find_bound(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS101-KS104: the verdict, on the function's def line, with what to try."""
    del options
    v = facts.verdict
    evidence: dict[str, float | int | str] = {
        k: round(val, 4) if isinstance(val, float) else val
        for k, val in (
            ("gpu_busy_fraction", v.gpu_busy_fraction_unprofiled or v.gpu_busy_fraction),
            ("gpu_us_per_step", v.gpu_us_per_step),
            ("kernels_per_step", v.kernels_per_step),
            ("achieved_tflops", v.achieved_tflops),
            ("achieved_gbps", v.achieved_gbps),
            ("arithmetic_intensity", v.arithmetic_intensity),
            ("ridge_point", v.ridge_point),
        )
        if val is not None
    }
    path, line = facts.function_path, facts.function_line
    if v.bound == "overhead":
        tries = [
            "give each call more work: batch inputs (`kernelscope scale` shows time per item as "
            "the batch grows)",
            'capture the steady state in a CUDA Graph: torch.compile(mode="reduce-overhead") '
            "or torch.cuda.graphs",
            "torch.compile to fuse small ops into fewer launches",
        ]
        if has_syncs(facts):
            tries.append("remove the host-device syncs below (KS301): each one drains the queue")
        yield Finding(Code.OVERHEAD_BOUND, Severity.WARNING, v.summary, path, line, tries, evidence)
    elif v.bound == "memory":
        tries = [
            "fuse elementwise chains with torch.compile (see KS501)",
            "move fewer bytes: bf16/fp16 activations halve the traffic",
        ]
        yield Finding(Code.MEMORY_BOUND, Severity.WARNING, v.summary, path, line, tries, evidence)
    elif v.bound == "compute":
        tries: list[str] = []
        if facts.matmul_gpu_us.get("float", 0) > 0.2 * sum(facts.matmul_gpu_us.values()):
            tries.append(
                "run fp32 matmuls on tensor cores: bf16, or TF32 via "
                'torch.set_float32_matmul_precision("high")'
            )
        if _unfused_attention(facts):
            tries.append("use fused attention: torch.nn.functional.scaled_dot_product_attention")
        if v.achieved_tflops and v.peak_tflops and v.achieved_tflops >= 0.7 * v.peak_tflops:
            tries.append(
                "near the device's peak: only less work (smaller or sparser models, "
                "lower precision such as FP8) or more devices go faster"
            )
        yield Finding(Code.COMPUTE_BOUND, Severity.INFO, v.summary, path, line, tries, evidence)
    elif v.bound == "transfer":
        tries = [
            "copy with non_blocking=True and overlap the copy with compute (a side stream)",
            "keep the data on the device across calls; move only what changes",
        ]
        if any(r.bound == "transfer" and "Pageable" in r.name for r in facts.roofline):
            tries.insert(
                0,
                "pin the host memory (tensor.pin_memory(), DataLoader(pin_memory=True)): "
                "pageable copies stage through a bounce buffer at a fraction of the link's "
                "speed",
            )
        yield Finding(Code.TRANSFER_BOUND, Severity.WARNING, v.summary, path, line, tries, evidence)
    elif v.bound == "mixed":
        tries = [
            "no single fix: work on the top contributors named above (see the roofline and KS701)",
            "torch.compile fuses the memory-bound elementwise and normalization ops",
        ]
        yield Finding(Code.MIXED, Severity.INFO, v.summary, path, line, tries, evidence)
    else:
        yield Finding(Code.HOST_ONLY, Severity.INFO, v.summary, path, line, evidence=evidence)


def _unfused_attention(facts: Facts) -> bool:
    """A softmax kernel and no fused attention kernel in the calls' GPU work: attention
    written out (or SDPA's math backend)."""
    kinds = {r.kind for r in facts.roofline}
    return "attention" not in kinds and any(r.name == "aten::_softmax" for r in facts.roofline)


def find_dead_window(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS201: cold entry → first kernel, and where that time went."""
    del options
    side = facts.sidecar
    if side is None or side.cold.entry_to_first_kernel_us is None:
        return
    dead = side.cold.entry_to_first_kernel_us
    parts = _dead_window_parts(facts.cold_trace, dead) if facts.cold_trace else []
    made_of = f"; {', '.join(parts)}" if parts else ""
    fresh = "first job of a fresh worker" if side.cold.process_fresh else "first call in this job"
    compiled = (
        f"; torch.compile compiled for {fmt(side.cold.compile_us)} of it"
        if side.cold.compile_us
        else ""
    )
    yield Finding(
        Code.COLD_START,
        Severity.HINT,
        f"cold start: {fmt(dead)} from entry to the first kernel ({fresh}; the whole first call "
        f"took {fmt(side.cold.first_call_us)}{compiled}){made_of}. Kept out of the warmed "
        "numbers.",
        path=facts.function_path,
        line=facts.function_line,
        try_=[
            "warm up once at start-up (a dummy batch) so users never wait on it",
            "CUDA_MODULE_LOADING=EAGER moves module loading to context creation",
        ],
        evidence={
            "entry_to_first_kernel_us": round(dead, 1),
            "first_call_us": round(side.cold.first_call_us, 1),
        },
    )


def _dead_window_parts(cold: Trace, dead: float) -> list[str]:
    """The ops and runtime calls that held the host before the first kernel."""
    entry = next((a for a in cold.user_annotations if a.name == COLD_RANGE), None)
    if entry is None:
        return []
    end = entry.ts + dead
    self_time: dict[str, float] = {}
    for op in cold.ops:
        if op.ts >= entry.ts and op.ts < end and op is not entry:
            own = max(0.0, min(op.end, end) - op.ts) - _children_in(cold, op, end)
            self_time[op.name] = self_time.get(op.name, 0.0) + own
    parts: list[str] = []
    for name, us in sorted(self_time.items(), key=lambda kv: -kv[1])[:3]:
        if us < 0.05 * dead:
            break
        why = _why_slow(name)
        parts.append(f"{fmt(us)} inside {name}" + (f" ({why})" if why else ""))
    return parts


def _children_in(trace: Trace, op: Op, end: float) -> float:
    return sum(max(0.0, min(c.end, end) - c.ts) for c in trace.children(op) if c.ts < end)


def _why_slow(name: str) -> str:
    if name in MATMULS:
        return "cuBLAS handle creation and lazy loading of the GEMM kernels"
    if "cudaMalloc" in name:
        return "the caching allocator growing"
    if "Compiled" in name or "dynamo" in name.lower() or "triton" in name.lower():
        return "compilation and autotuning"
    if name.startswith("aten::"):
        return "first use: lazy kernel module loading"
    return ""


def find_idle_gaps(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS401: GPU idle gaps inside the steps, and what the host ran meanwhile."""
    tl = facts.timeline
    if not tl.gap_starts or tl.wall_us <= 0:
        return
    unprofiled = facts.verdict.gpu_busy_fraction_unprofiled
    if unprofiled is not None and unprofiled >= 0.9:
        return  # unprofiled, the GPU barely idles: these gaps are the profiler's host cost
    idle = tl.idle_us
    if idle < 0.1 * tl.wall_us:
        return
    longest = tl.longest_gaps(3)
    meanwhile = Counter(name for g in longest for name in g.cpu_ops)
    ops = ", ".join(name for name, _ in meanwhile.most_common(3)) or "no recorded ops"
    yield Finding(
        Code.IDLE_GAPS,
        Severity.INFO,
        f"GPU idle {fmt(idle / tl.steps)} per step in {len(tl.gap_starts) / tl.steps:.3g} gaps "
        f"of ≥ {fmt(options.min_gap_us)} (longest {fmt(longest[0].dur)}); meanwhile the host ran "
        f"{ops}",
        path=facts.function_path,
        line=facts.function_line,
        try_=[
            "move host work (data preparation, Python logic, syncs) out of the step or "
            "overlap it with GPU work",
            "CUDA Graphs remove launch gaps between kernels",
        ],
        evidence={"idle_us_per_step": round(idle / tl.steps, 1), "gaps": len(tl.gap_starts)},
    )


def find_launch_queue(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS402: a long launch → start queue means a saturated GPU; none plus gaps, a starved one."""
    del options
    tl, v = facts.timeline, facts.verdict
    q = tl.median_queue_us
    if q is None or v.mean_kernel_us is None:
        return
    busy = v.gpu_busy_fraction_unprofiled or v.gpu_busy_fraction or 0.0
    if q > max(1000.0, 3 * v.mean_kernel_us):
        yield Finding(
            Code.LAUNCH_QUEUE,
            Severity.INFO,
            f"launch queue {fmt(q)} deep (median launch → start): the CPU runs ahead and the "
            "GPU is saturated; host overhead is hidden",
            path=facts.function_path,
            line=facts.function_line,
            evidence={"median_queue_us": round(q, 1)},
        )
    elif q < 50.0 and busy < BUSY_OVERHEAD:
        yield Finding(
            Code.LAUNCH_QUEUE,
            Severity.WARNING,
            f"no launch queue (kernels start {fmt(q)} after launch) and the GPU idles "
            f"{1 - busy:.0%} of the call: it is starved by the host",
            path=facts.function_path,
            line=facts.function_line,
            try_=["fewer, larger kernels (batching, torch.compile)", "CUDA Graphs"],
            evidence={"median_queue_us": round(q, 1)},
        )


CHAIN_MIN_SHARE = 0.02  # of the calls' GPU time
CHAIN_MIN_US = 5.0  # of GPU time per step


def find_fusion_chains(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS501: runs of elementwise kernels, each reading and writing whole tensors, when they
    take at least ``CHAIN_MIN_SHARE`` of the calls' GPU time and ``CHAIN_MIN_US`` per step."""
    del options
    tl = facts.timeline
    chains, chain_us = _elementwise_chains(facts)
    if not chains or not _matters(chain_us, tl.kernel_us, tl.steps):
        return
    steps = tl.steps
    names = Counter(op.name for chain in chains for op in chain)
    moved = sum(cost.bytes for cost in facts.costs.many([op for c in chains for op in c])) / steps
    lines = _lines_with_ops(facts, set(names))
    where = lines[0] if lines else (facts.function_path, facts.function_line)
    line_list = ", ".join(str(line) for _, line in lines[:6])
    severity = Severity.WARNING if facts.verdict.bound == "memory" else Severity.INFO
    yield Finding(
        Code.ELEMENTWISE_CHAIN,
        severity,
        f"{sum(len(c) for c in chains) / steps:g} elementwise kernels per step in chains "
        f"({', '.join(f'{n} ×{c // steps}' for n, c in names.most_common(4))})"
        + (f" moving {fmt_bytes(moved)} per step" if moved else "")
        + (f"; lines {line_list}" if line_list else "")
        + ": each kernel reads and writes the whole tensor",
        path=where[0],
        line=where[1],
        try_=[
            "torch.compile fuses the chain into one kernel: one read, one write",
            "or write it as one op (torch.addcmul, in-place ops, a custom Triton kernel)",
        ],
        evidence={
            "kernels_per_step": sum(len(c) for c in chains) / steps,
            "gpu_us_per_step": round(chain_us / steps, 1),
            "gpu_share": round(chain_us / tl.kernel_us, 3),
        },
    )


def _elementwise_chains(facts: Facts) -> tuple[list[list[Op]], float]:
    """Runs of two or more elementwise kernels in GPU order (copies and sets neither extend
    nor break one), with the GPU time of their kernels."""
    ops = facts.trace.ops
    chains: list[list[Op]] = []
    chain_us = 0.0
    run: list[Op] = []
    run_us = 0.0
    for g in facts.timeline.events:
        if g.cat != "kernel":
            continue
        op = ops[g.op] if g.op >= 0 else None
        if op is not None and op.name in POINTWISE:
            if not run or run[-1] is not op:
                run.append(op)
            run_us += g.dur
            continue
        if len(run) >= 2:
            chains.append(run)
            chain_us += run_us
        run, run_us = [], 0.0
    if len(run) >= 2:
        chains.append(run)
        chain_us += run_us
    return chains, chain_us


def _matters(us: float, gpu_us: float, steps: int) -> bool:
    """Whether GPU work of ``us`` in all is worth a finding: at least ``CHAIN_MIN_SHARE`` of
    the calls' ``gpu_us`` and ``CHAIN_MIN_US`` per step."""
    return us >= CHAIN_MIN_SHARE * gpu_us and us / max(steps, 1) >= CHAIN_MIN_US


def _lines_with_ops(facts: Facts, names: set[str]) -> list[tuple[str | None, int | None]]:
    if not facts.sidecar:
        return []
    hits = [s for s in facts.sidecar.lines if names & set(s.top_ops) and s.cuda_us > 0]
    hits.sort(key=lambda s: s.line)
    return [(s.path, s.line) for s in hits]


def find_profiler_distortion(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS601: the profiler's own cost, when it inflates host time noticeably."""
    del options
    side = facts.sidecar
    if side is None or side.timing.us_per_call <= 0 or facts.cpu_us_per_step <= 0:
        return
    host = side.timing.host_us_per_call or side.timing.us_per_call
    if side.device_type == "cuda" and facts.verdict.bound != "overhead":
        return
    ratio = facts.cpu_us_per_step / host
    if ratio < 1.3:
        return
    yield Finding(
        Code.PROFILER_DISTORTION,
        Severity.INFO,
        f"the profiler inflates host time {ratio:.1f}×: {fmt(facts.cpu_us_per_step)} per call "
        f"profiled vs {fmt(host)} unprofiled; small ops' CPU times here overstate their cost",
        path=facts.function_path,
        line=facts.function_line,
        try_=[
            "trust the unprofiled per-call time for the cost; use the profile for where it goes",
            "--no-stack lowers the profiler's cost",
        ],
        evidence={"profiled_us": round(facts.cpu_us_per_step, 1), "unprofiled_us": round(host, 1)},
    )


SLOW_SHARE = 0.10  # of the calls' GPU time
SLOW_COMPUTE = 0.35  # of the dtype's peak
SLOW_MEMORY = 0.25  # of HBM bandwidth
_ALIGN = {"c10::BFloat16": 8, "c10::Half": 8, "float": 4, "c10::Float8_e4m3fn": 16}


def find_slow_ops(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS701: ops with a large share of GPU time far below their own roof, and the causes
    the evidence supports."""
    del options
    sms = facts.sm_count
    for r in facts.roofline:
        if r.share < SLOW_SHARE or r.efficiency is None:
            continue
        floor = SLOW_COMPUTE if r.bound == "compute" else SLOW_MEMORY
        if r.bound not in ("compute", "memory") or r.efficiency >= floor:
            continue
        causes, tries = _slow_causes(facts, r, sms)
        rate = (
            f"{r.achieved_tflops:.0f} TFLOP/s"
            if r.bound == "compute"
            else f"{r.achieved_gbps:.0f} GB/s"
        )
        path, line = _row_line(facts, r)
        yield Finding(
            Code.BELOW_ROOF,
            Severity.WARNING,
            f"{r.name} ({r.shapes}) takes {r.share:.0%} of GPU time at {rate} = "
            f"{r.efficiency:.0%} of its roof ({r.roof}): {'; '.join(causes)}",
            path=path,
            line=line,
            try_=tries,
            evidence={
                "share": round(r.share, 3),
                "efficiency": round(r.efficiency, 3),
                "gpu_us_per_step": round(r.gpu_us_per_step, 1),
                "kernel": cut(r.kernel, 200),
            },
        )


def _slow_causes(facts: Facts, r: OpRoof, sms: int | None) -> tuple[list[str], list[str]]:
    causes: list[str] = []
    tries: list[str] = []
    dims = _matrix_dims(facts, r)
    align = _ALIGN.get(r.dtype or "", 8)
    odd = sorted({d for d in dims if d % align}) if r.kind in ("gemm", "conv") else []
    if odd:
        causes.append(
            f"{', '.join(map(str, odd))} is not a multiple of {align}: the library falls back to "
            f"a kernel without aligned vector loads ({cut(r.kernel, 80)})"
        )
        tries.append(
            f"pad that dimension to a multiple of {align} (64 is better still: "
            f"{odd[0]} → {-(-odd[0] // 64) * 64}), e.g. a padded vocabulary or hidden size"
        )
    if r.kind in ("gemm", "conv") and r.dtype == "float":
        causes.append("fp32 math on CUDA cores: TF32 tensor cores are off")
        tries.append(
            "torch.backends.cuda.matmul.allow_tf32 = True (or "
            'torch.set_float32_matmul_precision("high")), or bf16 autocast'
        )
    if r.grid_blocks is not None and sms and r.grid_blocks < sms:
        causes.append(f"its kernel's grid has {r.grid_blocks} blocks for {sms} SMs")
        tries.append("give the kernel more parallel work: a larger batch, or fuse small calls")
    if r.kind == "copy" and r.strides and _non_contiguous(facts, r):
        causes.append(f"a strided (non-contiguous) copy (strides {r.strides})")
        tries.append("avoid the copy: keep the layout the consumer wants, or copy once")
    if r.kind == "attention":
        tries.append(
            "try another SDPA backend: with torch.nn.attention.sdpa_kernel("
            "SDPBackend.CUDNN_ATTENTION) (on Hopper often the fastest) or FLASH_ATTENTION"
        )
    if not causes:
        causes.append(f"a slow kernel for this shape ({cut(r.kernel, 80)})")
        tries.append(
            "try another shape or dtype, torch.compile(mode='max-autotune'), or a fused library op"
        )
    return causes, tries


class _Layout(msgspec.Struct):
    dims: list[Any] = msgspec.field(default_factory=list[Any], name="Input Dims")
    strides: list[Any] = msgspec.field(default_factory=list[Any], name="Input Strides")


_LAYOUT = msgspec.json.Decoder(_Layout)


def _layout(op: Op) -> tuple[list[list[int]], list[list[int]]]:
    """The op's tensor shapes and strides (lists of ints only; others left out)."""
    try:
        layout = _LAYOUT.decode(op.args)
    except msgspec.MsgspecError:
        return [], []
    return _int_lists(layout.dims), _int_lists(layout.strides)


def _int_lists(values: list[Any]) -> list[list[int]]:
    out: list[list[int]] = []
    for v in values:
        if isinstance(v, list) and all(type(x) is int for x in cast("list[object]", v)):
            out.append(cast("list[int]", v))
    return out


def _matrix_dims(facts: Facts, r: OpRoof) -> list[int]:
    """The last two sizes of each tensor input of the row's op."""
    if r.op_index < 0:
        return []
    dims, _ = _layout(facts.trace.ops[r.op_index])
    return [size for shape in dims if len(shape) >= 2 for size in shape[-2:]]


def _non_contiguous(facts: Facts, r: OpRoof) -> bool:
    """Whether a tensor input of the row's op has strides other than row-major ones."""
    if r.op_index < 0:
        return False
    dims, strides = _layout(facts.trace.ops[r.op_index])
    for shape, stride in zip(dims, strides, strict=False):
        expect = 1
        for size, st in zip(reversed(shape), reversed(stride), strict=False):
            if size != 1 and st != expect:
                return True
            expect *= size
    return False


def _row_line(facts: Facts, r: OpRoof) -> tuple[str | None, int | None]:
    """The user's line that ran a row's op (for a backward op, the line of its forward op,
    matched by autograd's sequence number): from the line pass, else the Python stack,
    else the function's def line."""
    trace = facts.trace
    op = trace.ops[r.op_index] if r.op_index >= 0 else None
    forward = forward_op(trace, op) if op is not None else None
    names = [o.name for o in (forward, op) if o is not None] or [r.name]
    if facts.sidecar:
        for name in names:
            hits = [s for s in facts.sidecar.lines if name in s.top_ops]
            if hits:
                best = max(hits, key=lambda s: (s.cuda_us, s.self_cpu_us))
                return best.path, best.line
    for candidate in (forward, op):
        if candidate is not None:
            place = python_places(trace, [candidate])[0]
            if place != NO_PLACE:
                return place
    return facts.function_path, facts.function_line


def find_graph_replays(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS702: CUDA-graph replays: how many kernels one launch ran, and the launches saved."""
    del options
    launch = _mean_kernel_launch(facts.trace)
    for r in facts.roofline:
        if r.kind != "graph":
            continue
        replay = facts.trace.ops[r.op_index].dur if r.op_index >= 0 else None
        saved = (
            f"; launched one by one they would take ~{fmt(r.kernels_per_step * launch)} of host "
            f"time per step at this trace's {fmt(launch)} per launch"
            if launch
            else ""
        ) + (
            f"; one replay's launch took {fmt(replay)} on the host under the profiler"
            if replay
            else ""
        )
        path, line = _row_line(facts, r)
        yield Finding(
            Code.GRAPH_REPLAY,
            Severity.INFO,
            f"CUDA-graph replay: {r.kernels_per_step / max(r.calls_per_step, 1):g} kernels per "
            f"replay, {fmt(r.gpu_us_per_step)} of GPU work per step from "
            f"{r.calls_per_step:g} launch{'es' if r.calls_per_step != 1 else ''}{saved}",
            path=path,
            line=line,
            try_=[
                "the replay's kernels are tiny: fusing them (torch.compile before capture) "
                "cuts GPU time, not only launch time"
            ]
            if r.bound == "latency"
            else [],
            evidence={"kernels_per_step": r.kernels_per_step, "gpu_us_per_step": r.gpu_us_per_step},
        )


def _mean_kernel_launch(trace: Trace) -> float | None:
    durs = [op.dur for op in trace.launches if op.name in _KERNEL_LAUNCHES]
    return sum(durs) / len(durs) if durs else None


_KERNEL_LAUNCHES = frozenset(
    {"cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC"}
)
UNSTEADY = 0.2  # (p90 - p10) / median


def find_unsteady_timing(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS603: an unprofiled timing whose spread is too wide to compare runs by."""
    del options
    side = facts.sidecar
    t = side.timing if side else None
    if t is None or t.p10_us is None or t.p90_us is None or t.us_per_call <= 0:
        return
    spread = (t.p90_us - t.p10_us) / t.us_per_call
    if spread <= UNSTEADY:
        return
    yield Finding(
        Code.UNSTEADY_TIMING,
        Severity.INFO,
        f"the unprofiled timing is unsteady: p10–p90 {fmt(t.p10_us)}–{fmt(t.p90_us)} around a "
        f"median of {fmt(t.us_per_call)} over {t.reps} calls ({spread:.0%} wide); differences "
        "between runs smaller than that are noise",
        path=facts.function_path,
        line=facts.function_line,
        try_=[
            "profile again; close other GPU and CPU work on this host",
            "host-bound code varies between processes: compare medians of several runs",
        ],
        evidence={"spread": round(spread, 3), "reps": t.reps},
    )


CLOCK_FLOOR = 0.85  # of the maximum SM clock
_REASONS = {
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "power brake",
}


def find_throttled_clocks(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS604: GPU clocks well below their maximum over the timing (NVML): not representative."""
    del options
    side = facts.sidecar
    g = side.timing.gpu if side else None
    if g is None or g.sm_clock_max_mhz <= 0:
        return
    reasons = [name for bit, name in _REASONS.items() if g.clock_event_reasons & bit]
    low = g.sm_clock_mhz < CLOCK_FLOOR * g.sm_clock_max_mhz
    gpu_bound = facts.verdict.bound not in ("overhead", "host")
    if not reasons and not (low and gpu_bound):
        return
    why = f" ({', '.join(reasons)})" if reasons else " (clocks still ramping, or limited)"
    yield Finding(
        Code.LOW_CLOCKS,
        Severity.WARNING,
        f"the GPU ran at {g.sm_clock_mhz:.0f} of its {g.sm_clock_max_mhz:.0f} MHz over the "
        f"timing{why}, {g.power_w:.0f} W, utilization {g.utilization_pct:.0f} %: the numbers "
        "may not be representative",
        path=facts.function_path,
        line=facts.function_line,
        try_=["check nvidia-smi -q -d PERFORMANCE for the clock limits; profile again"],
        evidence={"sm_clock_mhz": g.sm_clock_mhz, "sm_clock_max_mhz": g.sm_clock_max_mhz},
    )


DEFAULT_CHECKS: tuple[Check, ...] = (
    find_bound,
    find_dead_window,
    find_sync_points,
    find_idle_gaps,
    find_launch_queue,
    find_fusion_chains,
    find_slow_ops,
    find_graph_replays,
    find_profiler_distortion,
    find_unsteady_timing,
    find_throttled_clocks,
    find_memory,
)
