"""KS702: CUDA-graph replays: kernels per replay and the launches they save."""

from __future__ import annotations

from collections.abc import Iterable

from kernelscope.analysis.checks.source_lines import row_line
from kernelscope.analysis.facts import Facts, Options
from kernelscope.analysis.trace_model import Trace
from kernelscope.findings import Code, Finding, Severity
from kernelscope.units import cut
from kernelscope.units import fmt_us as fmt


def find_graph_replays(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS702: CUDA-graph replays: how many kernels one launch ran, and the launches saved.
    Each kernel of a replay is a roofline row of its own (kind ``graph``); this sums them."""
    del options
    rows = [r for r in facts.roofline if r.kind == "graph"]
    if not rows:
        return
    top = rows[0]  # the roofline is sorted costliest first
    kernels = sum(r.kernels_per_step for r in rows)
    gpu = sum(r.gpu_us_per_step for r in rows)
    launches = max(r.calls_per_step for r in rows)
    tiny = sum(r.gpu_us_per_step for r in rows if r.bound == "latency")
    launch = _mean_kernel_launch(facts.trace)
    replay = facts.trace.ops[top.op_index].dur if top.op_index >= 0 else None
    saved = (
        f"; launched one by one they would take ~{fmt(kernels * launch)} of host "
        f"time per step at this trace's {fmt(launch)} per launch"
        if launch
        else ""
    ) + (
        f"; one replay's launch took {fmt(replay)} on the host under the profiler" if replay else ""
    )
    costliest = (
        f"; its costliest kernel {cut(top.name, 60)} ({fmt(top.gpu_us_per_step)} per step, "
        f"{top.bound})"
        if len(rows) > 1
        else ""
    )
    path, line = row_line(facts, top)
    yield Finding(
        Code.GRAPH_REPLAY,
        Severity.INFO,
        f"CUDA-graph replay: {kernels / max(launches, 1):g} kernels per replay, {fmt(gpu)} of "
        f"GPU work per step from {launches:g} launch{'es' if launches != 1 else ''}{saved}"
        f"{costliest}",
        path=path,
        line=line,
        try_=[
            "the replay's kernels are tiny: fusing them (torch.compile before capture) "
            "cuts GPU time, not only launch time"
        ]
        if tiny >= 0.5 * gpu
        else [],
        evidence={"kernels_per_step": kernels, "gpu_us_per_step": gpu},
    )


def _mean_kernel_launch(trace: Trace) -> float | None:
    durs = [op.dur for op in trace.launches if op.name in _KERNEL_LAUNCHES]
    return sum(durs) / len(durs) if durs else None


_KERNEL_LAUNCHES = frozenset(
    {"cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC"}
)
