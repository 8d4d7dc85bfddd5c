"""KS702: CUDA-graph replays: kernels per replay and the launches they save."""

from __future__ import annotations

from collections.abc import Iterable

from kernelscope.analysis.checks.source_lines import row_line
from kernelscope.analysis.facts import Facts, Options
from kernelscope.analysis.trace_model import Trace
from kernelscope.findings import Code, Finding, Severity
from kernelscope.units import fmt_us as fmt


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
        path, line = row_line(facts, r)
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
