"""The analyses: ``find_<problem>(facts, options) -> Iterable[Finding]``, in their default order.

Each reads the Facts built once in diagnose.py and yields Findings with a stable code; every
code is documented in docs/findings.md. Empty input gives no findings.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from kernelscope.diagnose import BUSY_OVERHEAD, Facts, Finder, Options
from kernelscope.findings import Finding, Severity
from kernelscope.flops import ATTENTION, MATMULS
from kernelscope.trace_model import Op, Trace
from kernelscope.units import fmt_bytes
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
_PY_FRAME = re.compile(r"^(?P<path>.+)\((?P<line>\d{1,9})\): (?P<func>.+)$")


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
        if _has_syncs(facts):
            tries.append("remove the host-device syncs below (KS301): each one drains the queue")
        yield Finding("KS101", Severity.WARNING, v.summary, path, line, tries, evidence)
    elif v.bound == "memory":
        tries = [
            "fuse elementwise chains with torch.compile (see KS501)",
            "move fewer bytes: bf16/fp16 activations halve the traffic",
        ]
        yield Finding("KS102", Severity.WARNING, v.summary, path, line, tries, evidence)
    elif v.bound == "compute":
        tries: list[str] = []
        if facts.matmul_gpu_us.get("float", 0) > 0.2 * sum(facts.matmul_gpu_us.values()):
            tries.append(
                "run fp32 matmuls on tensor cores: bf16, or TF32 via "
                'torch.set_float32_matmul_precision("high")'
            )
        if any(op.name in ATTENTION or op.name == "aten::_softmax" for op in facts.trace.cpu_ops):
            tries.append("use fused attention: torch.nn.functional.scaled_dot_product_attention")
        if v.achieved_tflops and v.peak_tflops and v.achieved_tflops >= 0.7 * v.peak_tflops:
            tries.append(
                "near the device's peak: only less work (smaller or sparser models, "
                "lower precision such as FP8) or more devices go faster"
            )
        yield Finding("KS103", Severity.INFO, v.summary, path, line, tries, evidence)
    else:
        yield Finding("KS104", Severity.INFO, v.summary, path, line, evidence=evidence)


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
    yield Finding(
        "KS201",
        Severity.HINT,
        f"cold start: {fmt(dead)} from entry to the first kernel ({fresh}; the whole first call "
        f"took {fmt(side.cold.first_call_us)}){made_of}. Kept out of the warmed numbers.",
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
    entry = next((a for a in cold.user_annotations if a.name == "ks:cold"), None)
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


def find_sync_points(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS301: host-device syncs on their lines, with the time the CPU waited."""
    lines = [s for s in facts.sidecar.lines if s.syncs > 0] if facts.sidecar else []
    if lines:
        cuda = facts.sidecar is not None and facts.sidecar.device_type == "cuda"
        for s in sorted(lines, key=lambda s: -s.sync_wait_us)[: options.max_sync_findings]:
            what = ", ".join(s.top_ops[:2]) or "a synchronize or copy call"
            wait = f", the CPU waiting {fmt(s.sync_wait_us)} per call" if cuda else ""
            yield Finding(
                "KS301",
                Severity.WARNING if cuda else Severity.INFO,
                f"host-device sync: {s.syncs} per call ({what}){wait}"
                + ("" if cuda else " (on a GPU this line would wait for the device)"),
                path=s.path,
                line=s.line,
                try_=[
                    "keep the value on the device (no .item(), .cpu(), .tolist(), print of a "
                    "tensor)",
                    "boolean-mask indexing and nonzero() sync to size the output: "
                    "use torch.where or masked ops",
                    "if the value is needed, fetch it once "
                    "per step, after the work is queued (non_blocking copies + an event)",
                ],
                evidence={"syncs_per_call": s.syncs, "wait_us": round(s.sync_wait_us, 1)},
            )
        return
    yield from _trace_syncs(facts, options)


def _trace_syncs(facts: Facts, options: Options) -> Iterable[Finding]:
    """Sync calls found in the trace alone, placed at their Python function when stacks exist."""
    trace = facts.trace
    by_place: dict[tuple[str | None, int | None], list[Op]] = {}
    syncs = facts.own_syncs
    for op, place in zip(syncs, _python_frames(trace, syncs), strict=True):
        by_place.setdefault(place, []).append(op)
    steps = max(len(trace.steps), 1)
    ranked = sorted(by_place.items(), key=lambda kv: -sum(o.dur for o in kv[1]))
    for (path, line), ops in ranked[: options.max_sync_findings]:
        names = ", ".join(sorted({o.name for o in ops}))
        wait = sum(o.dur for o in ops) / steps
        yield Finding(
            "KS301",
            Severity.WARNING,
            f"host-device sync: {len(ops) / steps:g} per step ({names}), the CPU waiting "
            f"{fmt(wait)} per step",
            path=path,
            line=line,
            try_=["keep values on the device; avoid .item(), .cpu(), .tolist() and boolean masks"],
            evidence={"wait_us": round(wait, 1)},
        )


_NO_PLACE: tuple[str | None, int | None] = (None, None)


def _python_frames(trace: Trace, ops: list[Op]) -> list[tuple[str | None, int | None]]:
    """For each op, the innermost user python_function around it (its def line: stacks are
    per function): a walk back from the op through the frames around it (``Trace.python_frames``),
    each frame's name parsed once per distinct name."""
    places: list[tuple[str | None, int | None]] = []
    user: dict[str, tuple[str, int] | None] = {}
    for op in ops:
        place = _NO_PLACE
        for frame in trace.python_frames(op):
            name = frame.name
            if name in user:
                found = user[name]
            else:
                found = user[name] = _user_frame(name)
            if found is not None:
                place = found
                break
        places.append(place)
    return places


def _user_frame(name: str) -> tuple[str, int] | None:
    """(path, line) of a python_function frame of the user's code, None for library and
    built-in frames."""
    m = _PY_FRAME.match(name)
    if m and "site-packages" not in m["path"] and not m["path"].startswith("<"):
        return m["path"], int(m["line"])
    return None


def find_idle_gaps(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS401: GPU idle gaps inside the steps, and what the host ran meanwhile."""
    tl = facts.timeline
    if not tl.gap_starts or tl.wall_us <= 0:
        return
    idle = tl.idle_us
    if idle < 0.1 * tl.wall_us:
        return
    longest = tl.longest_gaps(3)
    meanwhile = Counter(name for g in longest for name in g.cpu_ops)
    ops = ", ".join(name for name, _ in meanwhile.most_common(3)) or "no recorded ops"
    yield Finding(
        "KS401",
        Severity.INFO,
        f"GPU idle {fmt(idle / tl.steps)} per step in {len(tl.gap_starts) / tl.steps:g} gaps of ≥ "
        f"{fmt(options.min_gap_us)} (longest {fmt(longest[0].dur)}); meanwhile the host ran {ops}",
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
            "KS402",
            Severity.INFO,
            f"launch queue {fmt(q)} deep (median launch → start): the CPU runs ahead and the "
            "GPU is saturated; host overhead is hidden",
            path=facts.function_path,
            line=facts.function_line,
            evidence={"median_queue_us": round(q, 1)},
        )
    elif q < 50.0 and busy < BUSY_OVERHEAD:
        yield Finding(
            "KS402",
            Severity.WARNING,
            f"no launch queue (kernels start {fmt(q)} after launch) and the GPU idles "
            f"{1 - busy:.0%} of the call: it is starved by the host",
            path=facts.function_path,
            line=facts.function_line,
            try_=["fewer, larger kernels (batching, torch.compile)", "CUDA Graphs"],
            evidence={"median_queue_us": round(q, 1)},
        )


def find_fusion_chains(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS501: runs of elementwise kernels, each reading and writing whole tensors."""
    del options
    ops, tl = facts.trace.ops, facts.timeline
    chains: list[list[Op]] = []
    run: list[Op] = []
    for g in tl.events:
        if g.cat != "kernel":
            continue  # copies and sets neither extend nor break a chain
        op = ops[g.op] if g.op >= 0 else None
        if op is not None and op.name in POINTWISE:
            if not run or run[-1] is not op:
                run.append(op)
            continue
        if len(run) >= 2:
            chains.append(run)
        run = []
    if len(run) >= 2:
        chains.append(run)
    if not chains:
        return
    steps = tl.steps
    names = Counter(op.name for chain in chains for op in chain)
    moved = sum(cost.bytes for cost in facts.costs.many([op for c in chains for op in c])) / steps
    lines = _lines_with_ops(facts, set(names))
    where = lines[0] if lines else (facts.function_path, facts.function_line)
    line_list = ", ".join(str(line) for _, line in lines[:6])
    severity = Severity.WARNING if facts.verdict.bound == "memory" else Severity.INFO
    yield Finding(
        "KS501",
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
        evidence={"kernels_per_step": sum(len(c) for c in chains) / steps},
    )


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
        "KS601",
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


def _has_syncs(facts: Facts) -> bool:
    if facts.sidecar and any(s.syncs for s in facts.sidecar.lines):
        return True
    return bool(facts.own_syncs)


DEFAULT_FINDERS: tuple[Finder, ...] = (
    find_bound,
    find_dead_window,
    find_sync_points,
    find_idle_gaps,
    find_launch_queue,
    find_fusion_chains,
    find_profiler_distortion,
)
