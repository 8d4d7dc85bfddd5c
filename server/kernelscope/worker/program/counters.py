# pyright: basic
"""One warm call between cudaProfilerStart and cudaProfilerStop, for the worker that the
server started under Nsight Compute (``ncu --profile-from-start off`` measures only there)."""

from .errors import JobError
from .timing import warm_up


def run_counters(job):
    """Warm the call as the clean timing does, then range exactly one call."""

    def ranged(_fn, call, device, sync):
        if device.type != "cuda":
            raise JobError(
                "no_cuda", "hardware counters need a CUDA GPU (this call ran on the CPU)"
            )
        torch = job.torch
        per_call_us = warm_up(job, call, sync)
        job.progress("counters")
        sync()
        torch.cuda.profiler.start()
        try:
            call()
            sync()
        finally:
            torch.cuda.profiler.stop()
        job.progress("done")
        return {"type": "counters_finished", "job_id": job.id, "warm_us_per_call": per_call_us}

    return job.with_call(ranged)
