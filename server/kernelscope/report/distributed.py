"""A distributed step from its ranks' reports: how long each rank spends in collectives, who
the others wait for, and the verdict for the step. Pure over the per-rank reports.

Collectives hold every rank until the last one arrives, so the ranks' times per call come
out equal; who is late shows in the waiting instead. A rank's communication time is the self
time of its collective ops (gloo's and c10d's on the CPU, NCCL's kernels on a GPU); the rank
that spends the least there is the one the others wait for (the straggler), and the spread
of that time is the arrival skew.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence

import msgspec

from kernelscope.analysis.collectives import Collective
from kernelscope.findings import Code, Finding, Severity
from kernelscope.report.schema import OpRow, Report
from kernelscope.units import fmt_bytes, fmt_rate, fmt_us

#: Op names of collectives and their kernels: torch.distributed's record functions (gloo:,
#: nccl:), c10d's ops, and NCCL's kernels.
COLLECTIVE = re.compile(r"^(gloo:|nccl:|c10d::|ncclDevKernel_|ncclKernel_|ncclDev)")
#: The step is communication-bound when even the rank that waits least spends this share of
#: it in collectives; straggler-bound when the arrival skew is this share of it.
COMM_BOUND_SHARE = 0.4
STRAGGLER_SHARE = 0.2


class RankRow(msgspec.Struct):
    """One rank: its time per call, per-step time in collectives, and the rest."""

    rank: int
    us_per_call: float
    wall_us_per_step: float
    comm_us_per_step: float
    compute_us_per_step: float
    comm_share: float
    top_op: str
    trace: str
    overlap_share: float = 0.0
    """The share of its collectives' time hidden under its compute (``Communication``)."""
    idle_us_per_call: float = 0.0
    busbw_gbps: float = 0.0
    """The bus bandwidth of its costliest collective."""


class StepVerdict(msgspec.Struct):
    """communication | straggler | the ranks' own verdict (`rank0` names it)."""

    bound: str
    summary: str


class DistributedReport(msgspec.Struct):
    """A function run on N ranks: per rank, across ranks, the verdict, findings, and each
    rank's own report."""

    world_size: int
    backend: str
    ranks: list[RankRow]
    arrival_skew_us: float
    """Per step: the most time a rank spends in collectives less the least."""
    step_skew: float
    """(slowest - fastest) / median of the ranks' times per call."""
    straggler: int | None
    verdict: StepVerdict
    findings: list[Finding]
    merged_trace: str | None
    reports: list[Report]
    collectives: list[Collective] = []
    """Rank 0's collectives: kind, size, time per step, algorithm and bus bandwidth."""


def _cuda(report: Report) -> bool:
    return report.device.type == "cuda"


def _self_us(op: OpRow, cuda: bool) -> float:
    return op.self_cuda_us if cuda else op.self_cpu_us


def rank_row(rank: int, report: Report) -> RankRow:
    """One rank's times from its report."""
    cuda = _cuda(report)
    steps = max(1, report.steps.active)
    comm = sum(_self_us(op, cuda) for op in report.ops if COLLECTIVE.match(op.name)) / steps
    wall = report.timing.wall_us_per_step or report.timing.cuda_us_per_step
    busy = sum(_self_us(op, cuda) for op in report.ops if not COLLECTIVE.match(op.name)) / steps
    others = [op for op in report.ops if not COLLECTIVE.match(op.name)]
    top = max(others, key=lambda op: _self_us(op, cuda)).name if others else ""
    c = report.communication
    return RankRow(
        rank=rank,
        us_per_call=report.timing.unprofiled_us_per_call,
        wall_us_per_step=wall,
        comm_us_per_step=comm,
        compute_us_per_step=busy,
        comm_share=min(1.0, comm / wall) if wall > 0 else 0.0,
        top_op=top,
        trace=report.trace.path,
        overlap_share=c.overlap_share if c else 0.0,
        idle_us_per_call=c.idle_us if c else 0.0,
        busbw_gbps=c.collectives[0].busbw_gbps if c and c.collectives else 0.0,
    )


def analyze_ranks(
    reports: Sequence[Report], backend: str, merged_trace: str | None = None
) -> DistributedReport:
    """The step across its ranks (reports in rank order)."""
    rows = [rank_row(r, report) for r, report in enumerate(reports)]
    times = [row.us_per_call for row in rows]
    median = statistics.median(times) if times else 0.0
    step_skew = (max(times) - min(times)) / median if median > 0 else 0.0
    comms = [row.comm_us_per_step for row in rows]
    skew_us = max(comms) - min(comms) if comms else 0.0
    wall = statistics.median(row.wall_us_per_step for row in rows) if rows else 0.0
    least = min(rows, key=lambda row: row.comm_us_per_step) if rows else None
    findings: list[Finding] = []
    straggler: int | None = None
    if least is not None and wall > 0 and skew_us >= STRAGGLER_SHARE * wall:
        straggler = least.rank
        late = reports[least.rank]
        doing = _costliest_line(late)
        what = f"running {doing[0]}" if doing else f"in {least.top_op or 'its own work'}"
        summary = (
            f"straggler-bound: the other ranks wait up to {fmt_us(skew_us)} per step "
            f"({skew_us / wall:.0%} of it) in collectives for rank {least.rank}, which was {what}"
        )
        verdict = StepVerdict("straggler", summary)
        findings.append(
            Finding(
                Code.STRAGGLER,
                Severity.WARNING,
                summary.split(": ", 1)[1],
                late.function.path if doing is None else doing[1],
                late.function.line if doing is None else doing[2],
                try_=[
                    "balance the work across ranks (shard sizes, sequence lengths, data loading)",
                    "move the slow rank's extra work out of the step or overlap it",
                ],
                evidence={"rank": least.rank, "arrival_skew_us": skew_us, "step_us": wall},
            )
        )
    elif least is not None and least.comm_share >= COMM_BOUND_SHARE:
        first = reports[least.rank]
        summary = (
            f"communication-bound: even the rank that waits least spends {least.comm_share:.0%} "
            f"of the step ({fmt_us(least.comm_us_per_step)}) in collectives" + _moved(first)
        )
        verdict = StepVerdict("communication", summary)
        site = _collective_line(first)
        overlap = [
            "overlap communication with compute (DDP buckets: bucket_cap_mb; FSDP "
            "forward/backward prefetch)",
        ]
        less = [
            "communicate less often: gradient accumulation under model.no_sync()",
            "send less: bf16 gradients (a DDP comm hook) or larger batches per rank",
        ]
        hidden = least.overlap_share >= 0.5
        findings.append(
            Finding(
                Code.COMMUNICATION_BOUND,
                Severity.WARNING,
                summary.split(": ", 1)[1],
                site[1] if site else first.function.path,
                site[2] if site else first.function.line,
                try_=less + overlap if hidden else overlap + less,
                evidence={
                    "comm_share": least.comm_share,
                    "comm_us": least.comm_us_per_step,
                    "overlap_share": least.overlap_share,
                    "busbw_gbps": least.busbw_gbps,
                },
            )
        )
    else:
        own = reports[0].verdict if reports else None
        summary = (
            f"the ranks agree ({fmt_us(skew_us)} arrival skew per step); rank 0: "
            f"{own.summary if own else 'no verdict'}"
        )
        verdict = StepVerdict(own.bound if own else "unknown", summary)
    return DistributedReport(
        world_size=len(reports),
        backend=backend,
        ranks=rows,
        arrival_skew_us=skew_us,
        step_skew=step_skew,
        straggler=straggler,
        verdict=verdict,
        findings=findings,
        merged_trace=merged_trace,
        reports=list(reports),
        collectives=reports[0].communication.collectives
        if reports and reports[0].communication
        else [],
    )


def _moved(report: Report) -> str:
    """How much of it was hidden, and what the costliest collective moved how fast."""
    c = report.communication
    if c is None or not c.collectives:
        return ""
    top = c.collectives[0]
    size = f" of {fmt_bytes(top.bytes)}" if top.bytes else ""
    speed = f" at {fmt_rate(top.busbw_gbps)} bus bandwidth" if top.busbw_gbps else ""
    return f", {c.overlap_share:.0%} of it hidden under compute; {top.kind}{size}{speed}"


def _costliest_line(report: Report) -> tuple[str, str, int] | None:
    """The costliest attributed line whose top ops are no collectives: (`code` (file:line),
    path, line)."""
    cuda = _cuda(report)
    rows = [r for r in report.lines if not any(COLLECTIVE.match(op) for op in r.top_ops)]
    if not rows:
        return None
    top = max(rows, key=lambda r: r.cuda_us if cuda else r.self_cpu_us)
    name = top.path.rsplit("/", 1)[-1]
    return f"`{top.code}` ({name}:{top.line})", top.path, top.line


def _collective_line(report: Report) -> tuple[str, str, int] | None:
    """The costliest attributed line (in a communication-bound step, where the collectives
    are waited on)."""
    cuda = _cuda(report)
    if not report.lines:
        return None
    top = max(report.lines, key=lambda r: r.cuda_us if cuda else r.self_cpu_us)
    return top.code, top.path, top.line
