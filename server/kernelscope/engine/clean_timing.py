"""Timing a call again in a process that never profiled: a profiling session leaves
host-bound code slower in its process for good (1.3-2.1x on the H200, torch 2.11), GPU-bound
code unchanged. The launcher keeps such a worker warm; a Ray job runs one more job."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Literal

import msgspec

from kernelscope.engine.runner import JobFailed, ProgressCallback
from kernelscope.protocol import (
    JobProgress,
    ProfileFinished,
    RunProfile,
    RunTiming,
    TimingFinished,
)

log = logging.getLogger(__name__)

#: Set in the environment of the worker that only times calls: it never starts the profiler.
TIMING_WORKER_ENV = "KERNELSCOPE_TIMING_WORKER"
#: Its value for the worker that times host-bound calls again: kept to a fresh process's state
CLEAN_WORKER = "clean"
#: A call whose host takes this share of its unprofiled time or more is timed again in the
#: clean worker: a profiling session leaves host-bound code 1.3-2.1x slower in its process
#: (H200, torch 2.11), GPU-bound code unchanged.
CLEAN_TIMING_BELOW = 0.8
#: When a job's call is timed again in a process that never profiles: "auto" for host-bound
#: GPU calls (``host_bound``), "always" (tests use it on CPU), "never".
CleanTiming = Literal["auto", "always", "never"]


def host_bound(finished: ProfileFinished) -> bool:
    """Whether a GPU call waits on its host: timed with CUDA events back to back, the host
    took at least ``CLEAN_TIMING_BELOW`` of each call's time to enqueue it (a GPU-bound call
    is enqueued faster than the GPU runs it). A CPU call is not timed again: without CUPTI
    the profiler leaves no slowdown behind (docs/h200-run/loop_latency_*.txt: the profiling
    and the clean worker's CPU timings agree within their noise)."""
    side = finished.sidecar
    if side.device_type != "cuda":
        return False
    t = side.timing
    host = t.host_us_per_call or 0.0
    return t.us_per_call > 0 and host >= CLEAN_TIMING_BELOW * t.us_per_call


def timing_request(
    request: RunProfile,
    finished: ProfileFinished,
    host_best_us: float | None,
    replay_saved: bool = True,
) -> RunTiming:
    """The profile's call to time again, with the host's best reference loop: from its saved
    capture where the program's call was saved and `replay_saved` (the program does not run
    again; not where the timing may run on another machine than the capture's)."""
    fields = msgspec.structs.asdict(request) | {"job_id": request.job_id + "-t"}
    site = finished.sidecar.call_site
    if replay_saved and request.entry is not None and site is not None and site.saved:
        fields["entry"] = msgspec.structs.replace(request.entry, capture=site.saved)
    fields["host_reference_us"] = host_best_us
    return msgspec.convert(fields, RunTiming)


def with_clean_timing(finished: ProfileFinished, timed: TimingFinished) -> ProfileFinished:
    """The profile with the clean timing in place of its own (kept beside it)."""
    timing = timed.timing
    timing.profiling_worker_us_per_call = finished.sidecar.timing.us_per_call
    finished.sidecar.timing = timing
    return finished


async def timed_again(
    finished: ProfileFinished, run: Callable[[], Awaitable[object]], kept: str
) -> ProfileFinished:
    """The profile with the timing `run` returns (a TimingFinished) in place of its own; where
    `run` fails, the profile as it was, and the log says why (`kept`: whose timing stays)."""
    try:
        outcome = await run()
    except JobFailed as e:
        log.warning("clean timing failed, keeping the %s: %s", kept, e)
        return finished
    assert isinstance(outcome, TimingFinished)
    return with_clean_timing(finished, outcome)


def clean_progress(on_progress: ProgressCallback | None) -> ProgressCallback:
    """The timing job's progress as the profile's: its ``timing`` stage is ``clean_timing``."""

    def progress(msg: JobProgress) -> None:
        if on_progress is not None and msg.stage == "timing":
            on_progress(msgspec.structs.replace(msg, stage="clean_timing"))

    return progress
