# pyright: basic
"""The call timed without the profiler: CUDA events on a GPU, ``perf_counter`` on the CPU."""

import statistics
import time

from .nvml import GpuSampler

#: Warm-up before timing: calls until two in a row agree within STEADY (once WARMUP_S have
#: passed), at most WARMUP_CALLS calls or WARMUP_MAX_S seconds. A fresh process's first
#: calls can be 100x slower than its steady ones (lazy initialization; CPU: 65 ms, then
#: 0.2 ms, for a small transformer block), and a program's DataLoader workers may still be
#: filling their queues.
WARMUP_CALLS = 50
WARMUP_S = 0.05
WARMUP_MAX_S = 1.0
STEADY = 1.5


def run_timing(job):
    """Only the unprofiled timing, in a worker that never ran the profiler: a profiling
    session leaves host-bound code slower in its process. Warmed up like a script would
    be (up to 10 calls, stopping after the one that passes 50 ms): this worker may have
    just started."""

    def timed(_fn, call, device, sync):
        warm_up(job, call, sync)
        timing = unprofiled_timing(job, call, sync, device)
        job.progress("done")
        timing["process"] = "clean worker"
        timing["replayed_from"], timing["replay_note"] = job.replayed
        return {"type": "timing_finished", "job_id": job.id, "timing": timing}

    return job.with_call(timed)


def warm_up(job, call, sync):
    """Call until the calls are steady (see WARMUP_CALLS); how many calls that took."""
    job.progress("cold")
    t0 = last = time.perf_counter()
    previous = None
    for n in range(1, WARMUP_CALLS + 1):
        call()
        sync()
        now = time.perf_counter()
        took, last = now - last, now
        elapsed = now - t0
        steady = previous is not None and max(took, previous) <= STEADY * min(took, previous)
        done = elapsed >= WARMUP_MAX_S or (elapsed >= WARMUP_S and steady)
        # Every rank of a job makes as many calls (each may hold a collective): all stop
        # when the last one is steady.
        if job.ranks.agree(int(done), "min"):
            return n
        previous = took
    return WARMUP_CALLS


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
    p10, p90 = spread(samples)
    return {
        "us_per_call": statistics.median(samples),
        "method": method,
        "reps": reps,
        "samples_us": samples[:200],
        "host_us_per_call": host_us,
        "p10_us": p10,
        "p90_us": p90,
        "gpu": gpu,
        "process": "profiling worker",
        "replayed_from": "",
        "replay_note": "",
    }


def spread(samples):
    """p10 and p90 of the samples (within their range: few samples are not extrapolated)."""
    if len(samples) < 2:
        return samples[0], samples[0]
    deciles = statistics.quantiles(samples, n=10, method="inclusive")
    return deciles[0], deciles[-1]
