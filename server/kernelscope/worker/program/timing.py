# pyright: basic
"""The call timed without the profiler: CUDA events on a GPU, ``perf_counter`` on the CPU."""

import statistics
import time

from .nvml import GpuSampler

#: Warm-up before a clean worker's timing: this many calls, or until this many seconds.
WARMUP_CALLS = 10
WARMUP_S = 0.05


def run_timing(job):
    """Only the unprofiled timing, in a worker that never ran the profiler: a profiling
    session leaves host-bound code slower in its process. Warmed up like a script would
    be (up to 10 calls, stopping after the one that passes 50 ms): this worker may have
    just started."""
    _fn, call, device, sync = job.prepare()
    warm_up(job, call, sync)
    timing = unprofiled_timing(job, call, sync, device)
    job.progress("done")
    timing["process"] = "clean worker"
    return {"type": "timing_finished", "job_id": job.id, "timing": timing}


def warm_up(job, call, sync):
    """Call up to WARMUP_CALLS times, stopping after the call that passes WARMUP_S."""
    job.progress("cold")
    t0 = time.perf_counter()
    for _ in range(WARMUP_CALLS):
        call()
        sync()
        if time.perf_counter() - t0 > WARMUP_S:
            break


def unprofiled_timing(job, call, sync, device):
    """The call timed without the profiler (before the schedule, which slows host code)."""
    job.progress("timing")
    return time_unprofiled(job, call, sync, device.type == "cuda", device)


def time_unprofiled(job, call, sync, cuda, device):
    """Median of up to 100 calls within ~0.1 s (CUDA events on a GPU), their spread,
    and NVML's view of the GPU meanwhile."""
    sync()
    t = time.perf_counter()
    call()
    sync()
    probe_us = (time.perf_counter() - t) * 1e6
    reps = int(job.req.get("timing_reps") or 0)
    if reps <= 0:
        # ~0.1 s of calls: long sustained runs drift as the GPU's clocks settle lower
        reps = int(min(100, max(5, 0.1e6 / max(probe_us, 1.0))))
        reps = job.ranks.agree(reps)
    samples = []
    sampler = GpuSampler(job.torch, device) if cuda else None
    if sampler is not None:
        sampler.start()
    sync()
    t0 = time.perf_counter()
    if cuda:
        torch = job.torch
        events = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(reps)
        ]
        for start, end in events:
            start.record()
            call()
            end.record()
        host_us = (time.perf_counter() - t0) * 1e6 / reps
        sync()
        samples = [s.elapsed_time(e) * 1e3 for s, e in events]
        method = "cuda_events"
    else:
        for _ in range(reps):
            t = time.perf_counter()
            call()
            samples.append((time.perf_counter() - t) * 1e6)
        host_us = (time.perf_counter() - t0) * 1e6 / reps
        method = "perf_counter"
    gpu = sampler.stop() if sampler is not None else None
    deciles = statistics.quantiles(samples, n=10) if len(samples) >= 2 else samples * 9
    return {
        "us_per_call": statistics.median(samples),
        "method": method,
        "reps": reps,
        "samples_us": samples[:200],
        "host_us_per_call": host_us,
        "p10_us": deciles[0],
        "p90_us": deciles[-1],
        "gpu": gpu,
        "process": "profiling worker",
    }
