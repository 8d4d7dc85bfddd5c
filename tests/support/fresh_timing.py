"""A call timed in a fresh process exactly as the worker times it (its own warm-up and
timing functions, the same count of calls), with nothing of the worker around it: the
reference the worker's unprofiled figure must match (issue 24, item 5).

    python tests/support/fresh_timing.py PATH::FUNC DEVICE [REPS]

prints one JSON object: ``us_per_call`` (median), ``reps``, ``warmup_us_per_call``,
``cpu`` (the CPU it last ran on), ``window_s`` (when the timed calls ran, on
``time.monotonic()``), ``slowed`` (the calls the host slowed, as the worker reports them),
``reference_us`` (its fastest reference loop: the thread's CPU speed at its best),
``threads`` (the threads that ran during the timed calls, as the worker reports them).

With KS_FRESH_AS_WORKER=1 the process takes on the two things the profiling worker's start
leaves behind (TORCHINDUCTOR_BENCHMARK_KERNEL=1, and torch's objects collected and frozen out
of the garbage collector's reach; the clean worker has neither since 2026-12-03), to tell
them apart from the rest.
Needs ``server/`` on ``PYTHONPATH`` (the worker's timing module; no msgspec needed).
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import sys
from typing import Any


class Alone:
    """A job of one process: nothing to agree with."""

    dist = None

    def agree(self, value: Any, op: str = "max", what: str = "") -> Any:
        return value


class TimingJob:
    """What the worker's timing functions read of a job."""

    def __init__(self, torch: Any, reps: int) -> None:
        self.torch = torch
        self.req = {"timing_reps": reps}
        self.ranks = Alone()

    def progress(self, stage: str, step: int = 0, total: int = 0) -> None:
        pass


def at_speed(figure: dict[str, Any], best_loop: float, slowed: float = 1.3) -> bool:
    """Whether a figure (UnprofiledTiming as JSON, or this script's) was timed at the host's
    speed: no slowed spell among its calls, or the slowed calls left out (or kept as no
    slower), and its thread's best loop within `slowed` (the worker's SLOWED) of the best
    any process read (a thread slowed for all its calls finds no spell in them)."""
    s = figure["slowed"]
    spells_out = s is None or s["left_out"] or s["kept_because"] == "not slower"
    return spells_out and figure["reference_us"] <= slowed * best_loop


def last_cpu() -> int:
    """The CPU this process last ran on (/proc/self/stat's 39th field; -1 where unknown)."""
    try:
        with open("/proc/self/stat") as f:
            return int(f.read().rpartition(")")[2].split()[36])
    except (OSError, ValueError, IndexError):
        return -1


def load_workload(spec: str, device: str) -> tuple[Any, Any]:
    """PATH::FUNC's function and the arguments its ``FUNC_inputs(device=...)`` builds."""
    path, qualname = spec.split("::")
    module_spec = importlib.util.spec_from_file_location("workload", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return getattr(module, qualname), getattr(module, qualname + "_inputs")(device=device)


def main() -> None:
    """Import the workload, build its inputs, warm up and time as the worker does."""
    as_worker = os.environ.get("KS_FRESH_AS_WORKER") == "1"
    if as_worker:
        os.environ["TORCHINDUCTOR_BENCHMARK_KERNEL"] = "1"
    import torch

    if as_worker:
        gc.collect()
        gc.freeze()

    from kernelscope.worker.program.timing import unprofiled_timing, warm_up

    spec, device_name = sys.argv[1], sys.argv[2]
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    fn, args = load_workload(spec, device_name)
    device = torch.device(device_name)
    cuda = device.type == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    def call() -> Any:
        return fn(*args)

    job = TimingJob(torch, reps)
    per_call = warm_up(job, call, sync)
    timing = unprofiled_timing(job, call, sync, device, per_call)
    out = {"us_per_call": timing["us_per_call"], "reps": timing["reps"], "cpu": last_cpu()}
    out["window_s"] = timing["window_s"]
    out["slowed"] = timing["slowed"]
    out["reference_us"] = timing["reference_us"]
    out["threads"] = timing["threads"]
    print(json.dumps(out | {"warmup_us_per_call": per_call}))


if __name__ == "__main__":
    main()
