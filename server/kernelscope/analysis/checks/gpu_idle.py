"""KS401, KS402: GPU idle gaps inside the steps, and the launch queue that tells a saturated GPU
from a starved one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from kernelscope.analysis.facts import Facts, Options
from kernelscope.analysis.verdict import BUSY_OVERHEAD
from kernelscope.findings import Code, Finding, Severity
from kernelscope.units import fmt_us as fmt


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
