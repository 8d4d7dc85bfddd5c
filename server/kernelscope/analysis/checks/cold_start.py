"""KS201: the cold call's dead window, from entry to the first kernel, and where it went."""

from __future__ import annotations

from collections.abc import Iterable

from kernelscope.analysis.calls import COLD_RANGE
from kernelscope.analysis.costs import MATMULS
from kernelscope.analysis.facts import Facts, Options
from kernelscope.analysis.trace_model import Op, Trace
from kernelscope.findings import Code, Finding, Severity
from kernelscope.units import fmt_us as fmt


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
