"""``--counters``: after a profile, the same call measured by Nsight Compute in a worker of
its own (engine/counters.py), its CSV read into the sidecar (analysis/counters.py), where the
report's roofline rows find it."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

import msgspec

from kernelscope.analysis.counters import (
    CountersError,
    KernelPick,
    costliest_functions,
    parse_ncu_csv,
)
from kernelscope.analysis.timeline import build_timeline
from kernelscope.app.held_trace import HELD
from kernelscope.engine.counters import (
    CountersUnavailable,
    ncu_failure,
    run_under_ncu,
)
from kernelscope.engine.kernel_choice import DEFAULT_KERNELS
from kernelscope.engine.remotes import Remote
from kernelscope.engine.runner import JobFailed, JobResult
from kernelscope.protocol import Counters, ProfileFinished, RunProfile

NEEDS_CUDA = "hardware counters need a CUDA GPU: this call ran on the CPU"
HERE_ONLY = "--counters measures on this machine's GPU only (not on a remote yet)"
NOT_IN_PLACE = "--counters measures a captured call; a loop run in place cannot be run again"

#: Chooses the kernel functions to measure for a job, a launch count and a pattern
#: (costliest_kernels, run where the caller keeps its traces: a thread, or the editor's
#: analysis process).
Chooser = Callable[[ProfileFinished, int, str], Awaitable[KernelPick]]


def too_many(match: str, launch_count: int, left_out: dict[str, int]) -> str:
    """The one line of a pattern whose kernels' functions each launch more kernels than the
    launch count lets ncu measure."""
    named = ", ".join(f"{name} ({n} launches)" for name, n in left_out.items())
    return (
        f"the kernels matching {match!r} launch more than the {launch_count} measured at most "
        f"(each function is measured in all its launches): {named}; raise --counters-limit "
        "or narrow the pattern"
    )


def matched_none(match: str) -> str:
    """The one line of a pattern that matched none of the call's kernels."""
    return (
        f"no kernel of the profiled call has a name matching {match!r} (searched in the "
        "trace's kernel names, namespaces and template arguments included)"
    )


async def measure_counters(
    request: RunProfile,
    result: JobResult,
    python: str | None = None,
    remote: Remote | None = None,
    timeout: float = 300.0,
    launch_count: int = DEFAULT_KERNELS,
    ncu_path: str | None = None,
    choose: Chooser | None = None,
    match: str = "",
) -> Counters:
    """The counters of the profiled call, or a Counters whose ``error`` says in one line why
    there are none (never raises for a machine that cannot measure). A call of more kernels
    than `launch_count` has the functions of its costliest ops measured (`choose`:
    costliest_kernels in a thread by default; its trace is held for the report), and its
    first kernels where ncu found none of those names. With `match`, only the functions of
    the kernels it matches (costliest_functions)."""
    side = result.finished.sidecar
    if side.device_type != "cuda":
        return Counters(error=NEEDS_CUDA, match=match)
    if remote is not None:
        return Counters(error=HERE_ONLY, match=match)
    entry = request.entry
    if entry is not None:
        if entry.in_place:
            return Counters(error=NOT_IN_PLACE, match=match)
        site = side.call_site
        if site is not None and site.saved:  # replay the saved call: the program does not run
            request = msgspec.structs.replace(
                request, entry=msgspec.structs.replace(entry, capture=site.saved)
            )
    functions, left_out, unread = await (choose or _in_thread)(result.finished, launch_count, match)
    if match and not functions:
        error = (
            f"the kernels matching {match!r} could not be chosen: {unread}"
            if unread
            else too_many(match, launch_count, left_out)
            if left_out
            else matched_none(match)
        )
        return Counters(error=error, launch_count=launch_count, match=match)
    try:
        run = await run_under_ncu(
            request, python or sys.executable, timeout, launch_count, ncu_path,
            functions=functions,
        )  # fmt: skip
    except CountersUnavailable as e:
        return Counters(error=str(e), match=match)
    except JobFailed as e:
        failed = f"the call failed under Nsight Compute: {e.failure.message}"
        return Counters(error=failed, match=match)
    try:
        kernels = parse_ncu_csv(run.log)
    except CountersError as e:
        if functions and not match and ncu_failure(run.log) is None:  # ncu knew none of
            # the names: the call's first kernels
            return await measure_counters(
                request, result, python, remote, timeout, launch_count, ncu_path, _none
            )
        return Counters(error=ncu_failure(run.log) or str(e), seconds=run.seconds, match=match)
    return Counters(
        kernels=kernels,
        seconds=run.seconds,
        launch_count=run.launch_count,
        missing_metrics=run.missing,
        functions=functions,
        match=match,
        left_out=left_out,
    )


def costliest_kernels(finished: ProfileFinished, launch_count: int, match: str = "") -> KernelPick:
    """The kernel functions to measure, from the profile's own trace (costliest_functions),
    the trace held for the report (held_trace); [] where it cannot be read (then the call's
    first kernels are measured, or with `match` none)."""
    try:
        trace = HELD.read(finished.trace_path)
        timeline = build_timeline(trace)
        return costliest_functions(trace, timeline.events, timeline.steps, launch_count, match)
    except Exception as e:  # any trace it cannot read: the first kernels are measured
        return KernelPick([], {}, f"the trace could not be read ({type(e).__name__}: {e})")


async def _in_thread(finished: ProfileFinished, launch_count: int, match: str) -> KernelPick:
    return await asyncio.to_thread(costliest_kernels, finished, launch_count, match)


async def _none(finished: ProfileFinished, launch_count: int, match: str) -> KernelPick:
    return KernelPick([], {})
