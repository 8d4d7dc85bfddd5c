"""Profile one function on N ranks (`--nproc N`) of this host or of a Ray remote: the ranks
run in lockstep (engine/ranks.py, engine/ray_jobs.py), each rank's trace becomes its report,
the traces are merged into one for Perfetto (one process per rank, on one clock), and the
step is judged across the ranks."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, cast

import msgspec

from kernelscope.analysis.verdict import Verdict
from kernelscope.app.profile import job_report
from kernelscope.app.store import RunRecord, now
from kernelscope.engine.dispatch import profile_on_ranks
from kernelscope.engine.remotes import Remote
from kernelscope.engine.runner import JobResult, ProgressCallback
from kernelscope.protocol import RunProfile
from kernelscope.report.distributed import DistributedReport, analyze_ranks
from kernelscope.report.files import sidecar_path
from kernelscope.report.schema import Report

#: Process ids of rank r's events in the merged trace: r * RANK_PID + the rank's own pid;
#: its flow and async ids likewise (they are per process, so ranks repeat each other's).
RANK_PID = 10_000_000
RANK_FLOW = 1 << 40
_LINKED = frozenset("stfbenSTF")


def distributed_job(
    results: list[JobResult],
    path: Path,
    qualname: str,
    request: RunProfile,
    text_hash: str,
    remote: str | None = None,
) -> RunRecord:
    """In the analysis process: the ranks' reports, the step's, and the run the editor
    keeps: rank 0's report with the step's verdict first and its findings added, its trace
    the merged one (every rank in Perfetto)."""
    d = step_report(results, str(path), qualname, request, remote)
    report = run_report(d)
    _forget_ranks(results, report)
    return RunRecord(request.job_id, str(path), qualname, now(), text_hash, report)


def _forget_ranks(results: list[JobResult], kept: Report) -> None:
    """Delete the ranks' own traces and sidecars once merged (the store keeps and prunes
    the run's: the merged trace and rank 0's cold one)."""
    keep = {kept.trace.path, kept.trace.cold_path}
    for r in results:
        trace = Path(r.finished.trace_path)
        cold = r.finished.sidecar.cold.trace_path
        for file in (trace, sidecar_path(trace), Path(cold) if cold else None):
            if file is not None and str(file) not in keep:
                file.unlink(missing_ok=True)


def run_report(d: DistributedReport) -> Report:
    """Rank 0's report standing for the step."""
    first = d.reports[0]
    summary = f"{d.world_size} ranks ({d.backend}): {d.verdict.summary}"
    verdict = msgspec.structs.replace(
        first.verdict or Verdict(bound=d.verdict.bound, summary=summary),
        bound=d.verdict.bound,
        summary=summary,
    )
    trace = (
        msgspec.structs.replace(first.trace, path=d.merged_trace) if d.merged_trace else first.trace
    )
    return msgspec.structs.replace(
        first, verdict=verdict, findings=[*d.findings, *first.findings], trace=trace
    )


def step_report(
    results: list[JobResult],
    path: str,
    qualname: str,
    request: RunProfile,
    remote: str | None = None,
) -> DistributedReport:
    """Each rank's report (``remote`` names where they ran), the merged trace, and the step
    judged across them."""
    reports = [job_report(r, path, qualname, remote) for r in results]
    merged = merge_traces([Path(r.finished.trace_path) for r in results], request)
    return analyze_ranks(reports, _backend(reports), str(merged) if merged else None)


async def profile_distributed(
    request: RunProfile,
    nproc: int,
    path: str,
    qualname: str,
    python: str | None = None,
    on_progress: ProgressCallback | None = None,
    timeout: float = 120.0,
    remote: Remote | None = None,
) -> DistributedReport:
    """Run the ranks (here, or in one job on a Ray remote), build each one's report and the
    step's; raises JobFailed (naming the ranks) or TraceError."""
    results = await profile_on_ranks(request, nproc, remote, python, on_progress, timeout)
    return step_report(results, path, qualname, request, remote.name if remote else None)


def _backend(reports: list[Report]) -> str:
    return "nccl" if reports and reports[0].device.type == "cuda" else "gloo"


def merge_traces(traces: list[Path], request: RunProfile) -> Path | None:
    """The ranks' traces as one: rank r's processes renumbered r × RANK_PID + pid and named
    "rank r · …", its times shifted onto rank 0's clock (Kineto's baseTimeNanoseconds); None
    when a trace cannot be read."""
    stem = f"{request.qualname.replace('.', '_')}-{request.job_id}"
    out = Path(request.trace_dir) / f"{stem}.ranks.pt.trace.json.gz"
    events: list[dict[str, Any]] = []
    head: dict[str, Any] = {}
    base0: float | None = None
    for rank, trace in enumerate(traces):
        try:
            with gzip.open(trace, "rb") as f:
                data = cast(dict[str, Any], json.load(f))
        except (OSError, ValueError, EOFError):
            return None
        base = float(data.get("baseTimeNanoseconds") or 0) / 1000.0
        base0 = base if base0 is None else base0
        shift = base - base0
        if not head:
            head = {k: v for k, v in data.items() if k != "traceEvents"}
        for event in cast(list[dict[str, Any]], data.get("traceEvents", [])):
            pid = event.get("pid")
            if isinstance(pid, int):
                event["pid"] = rank * RANK_PID + pid
                if event.get("ph") == "M" and event.get("name") == "process_name":
                    args = cast(dict[str, Any], event.setdefault("args", {}))
                    args["name"] = f"rank {rank} · {args.get('name', pid)}"
            flow = event.get("id")
            if isinstance(flow, int) and event.get("ph") in _LINKED:
                event["id"] = rank * RANK_FLOW + flow  # flows link within their rank only
            if shift and isinstance(event.get("ts"), int | float):
                event["ts"] = float(event["ts"]) + shift
            events.append(event)
    head["traceEvents"] = events
    try:
        with gzip.open(out, "wt", compresslevel=1) as f:
            json.dump(head, f)
    except OSError:
        return None
    return out
