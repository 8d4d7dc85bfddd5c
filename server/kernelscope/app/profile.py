"""Profile one function: the steps the CLI and the editor's job service share (the remote
resolved by name, the job run, its sidecar saved and its report built)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from kernelscope.app.counters import Chooser, measure_counters
from kernelscope.app.held_trace import HELD
from kernelscope.engine.dispatch import runner_for
from kernelscope.engine.kernel_choice import KernelChoice
from kernelscope.engine.project import Project, provider_hint
from kernelscope.engine.remotes import Remote, find_remote
from kernelscope.engine.runner import JobResult, ProgressCallback
from kernelscope.protocol import JobProgress, ProfileFailed, RunProfile
from kernelscope.report.build import report_for_job
from kernelscope.report.files import save_sidecar
from kernelscope.report.schema import Report


def resolve_remote(
    name: str | None,
    project: Project,
    settings: Mapping[str, Any] | None = None,
    python: str | None = None,
) -> Remote | None:
    """The remote called `name`: the editor's settings first, then the project's
    pyproject.toml (`python` overrides its interpreter). RemoteError when it is not there
    or not valid."""
    if name is None:
        return None
    pyproject = str(project.root / "pyproject.toml")
    remote = find_remote(name, project.remotes, settings or {}, pyproject)
    return dataclasses.replace(remote, python=python) if python else remote


async def profile_once(
    request: RunProfile,
    python: str | None = None,
    remote: Remote | None = None,
    on_progress: ProgressCallback | None = None,
    timeout: float = 120.0,
    counters: bool = False,
    kernels: KernelChoice | None = None,
) -> JobResult:
    """One job on a worker of its own, closed after (the CLI's way; the editor keeps its
    workers warm in jobs.ProfileService); with ``counters``, the call measured by Nsight
    Compute after (`kernels`: which of its kernels), into the sidecar. Raises JobFailed."""
    runner = runner_for(remote, python, respawn=False)
    try:
        result = await runner.profile(request, on_progress, timeout)
    finally:
        await runner.close()  # before counters: one job on the GPU at a time
    if counters:
        await add_counters(request, result, python, remote, on_progress, timeout, kernels=kernels)
    return result


async def add_counters(
    request: RunProfile,
    result: JobResult,
    python: str | None,
    remote: Remote | None,
    on_progress: ProgressCallback | None,
    timeout: float,
    choose: Chooser | None = None,
    kernels: KernelChoice | None = None,
) -> None:
    """Measure the job's call under Nsight Compute and keep what came of it in its sidecar
    (the counters, or the one line that says why there are none). `choose` picks the kernels
    (at most `kernels.limit`, those `kernels.match` names) where the report will be built
    (the trace it reads is held for it: ``job_report``)."""
    if on_progress is not None:
        on_progress(JobProgress(job_id=request.job_id, stage="counters"))
    t = time.perf_counter()
    kernels = kernels or KernelChoice()
    measured = await measure_counters(
        request, result, python, remote, max(timeout, 300.0), kernels.limit, choose=choose,
        match=kernels.match,
    )  # fmt: skip
    result.finished.sidecar.counters = measured
    result.stages_s["counters"] = time.perf_counter() - t


def job_report(result: JobResult, path: str, qualname: str, remote: str | None = None) -> Report:
    """Save the job's sidecar beside its trace and build its report (reads the traces, or
    takes the one ``--counters`` read and held; raises TraceError)."""
    save_sidecar(result.finished)
    return report_for_job(
        result.finished,
        path,
        qualname,
        result.ready,
        remote=remote,
        stages_s=result.stages_s,
        trace=HELD.take(result.finished.trace_path),
    )


def with_hint(failure: ProfileFailed, qualname: str) -> ProfileFailed:
    """A missing-inputs failure with the provider stub to paste (into kernelscope_inputs.py
    beside the file), when it has none."""
    if failure.kind == "missing_inputs" and failure.path and not failure.hint:
        return msgspec.structs.replace(failure, hint=provider_hint(Path(failure.path), qualname))
    return failure
