# pyright: basic
"""Names the worker shares with the server, the worker's own fixed values, and how it reads
a number the user set in the environment.

The worker cannot import kernelscope (it runs alone on GPU hosts), so it keeps twins of
server-side names; tests/unit/test_worker_twins.py fails when one drifts.
"""

import os

# Twins of server-side names:
CALL_RANGE = "ks:call"  # kernelscope.analysis.calls.CALL_RANGE
COLD_RANGE = "ks:cold"  # what kernelscope.analysis.checks looks up in the cold trace
# A rank of a distributed job: torchrun's variables (kernelscope.protocol.DIST_*).
DIST_RANK, DIST_WORLD_SIZE, DIST_LOCAL_RANK = "RANK", "WORLD_SIZE", "LOCAL_RANK"
DIST_TIMEOUT_ENV = "KERNELSCOPE_DIST_TIMEOUT"
DIST_AGREE_PORT_ENV = "KERNELSCOPE_AGREE_PORT"
TIMING_WORKER_ENV = "KERNELSCOPE_TIMING_WORKER"  # kernelscope.engine.clean_timing
CLEAN_WORKER = "clean"  # kernelscope.engine.clean_timing: TIMING_WORKER_ENV's value for it
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")  # kernelscope.analysis.trace_model
# Runtime calls the line pass counts as syncs: a name containing one of these, not "Async"
# (the server's facts.is_sync).
SYNC_CALLS = ("Synchronize", "cudaMemcpy", "cuMemcpyDtoH", "hipMemcpy")

SYNC_OPS = ("aten::_local_scalar_dense", "aten::nonzero")
STAGES_PROFILED = ("wait", "warmup", "active")
# Generated code (Inductor's and Triton's caches) is never the user's, even under the project
GENERATED_CODE = ("/torchinductor_", "/.triton/", "/triton/cache", "<eval_with_key>")
# Inductor writes its own FLOPs and bytes on each kernel's profiler record when it compiles
# with this set (kernelscope.analysis.costs.generated); it then also prints this line per graph.
BENCHMARK_KERNEL_ENV = "TORCHINDUCTOR_BENCHMARK_KERNEL"
PROFILED_BUDGET_ENV = "KERNELSCOPE_PROFILED_SECONDS"  # timing.PROFILED_BUDGET_S, overridden
PROFILER_GB_ENV = "KERNELSCOPE_PROFILER_GB"  # event_budget.room_bytes, overridden
BENCHMARK_KERNEL_LINE = b"Compiled module path: "
#: torch.profiler's stack tracer, started inside a running frame (in place), warns of it
PROFILER_STACK_WARNING = b"Python replay stack is empty during pop operation"


def positive_env(name, default=None):
    """The positive number the user set in environment variable `name`, else `default`
    (unset, not a number, not positive, or infinite)."""
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if 0 < value < float("inf") else default
