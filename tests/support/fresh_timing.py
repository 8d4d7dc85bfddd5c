"""A call timed in a fresh process exactly as the worker times it (its own warm-up and
timing functions, the same count of calls), with nothing of the worker around it: the
reference the worker's unprofiled figure must match (issue 24, item 5).

    python tests/support/fresh_timing.py PATH::FUNC DEVICE [REPS]
    python tests/support/fresh_timing.py PATH::FUNC DEVICE --stream STOP OUT

prints one JSON object: ``us_per_call`` (median), ``reps``, ``warmup_us_per_call``,
``cpu`` (the CPU it last ran on), ``window_s`` (when the timed calls ran, on
``time.monotonic()``). With ``--stream`` it prints ``ready`` once warmed up, then times calls
back to back (as the worker does, in blocks of ~50 ms) until the file STOP
exists, and writes every call's ``[start, us]`` to OUT (start on ``time.monotonic()``): run
beside a worker, the calls inside the worker's timing window met the same host.

With KS_FRESH_AS_WORKER=1 the process takes on the two things a worker's start leaves
behind (TORCHINDUCTOR_BENCHMARK_KERNEL=1, and torch's objects collected and frozen out of the
garbage collector's reach), to tell them apart from the rest.
Needs ``server/`` on ``PYTHONPATH`` (the worker's timing module; no msgspec needed).
"""

from __future__ import annotations

import gc
import importlib.util
import json
import os
import sys
import time
from typing import Any

STREAM_BLOCK_S = 0.05
STREAM_MAX_S = 600.0


class Alone:
    """A job of one process: nothing to agree with."""

    dist = None

    def agree(self, value: Any, op: str = "max") -> Any:
        return value


class TimingJob:
    """What the worker's timing functions read of a job."""

    def __init__(self, torch: Any, reps: int) -> None:
        self.torch = torch
        self.req = {"timing_reps": reps}
        self.ranks = Alone()

    def progress(self, stage: str, step: int = 0, total: int = 0) -> None:
        pass


def last_cpu() -> int:
    """The CPU this process last ran on (/proc/self/stat's 39th field; -1 where unknown)."""
    try:
        with open("/proc/self/stat") as f:
            return int(f.read().rpartition(")")[2].split()[36])
    except (OSError, ValueError, IndexError):
        return -1


def stream_calls(
    torch: Any, call: Any, sync: Any, cuda: bool, per_call_us: float, stop: str
) -> list[list[float]]:
    """Every call's [monotonic start, µs] until `stop` exists (at most STREAM_MAX_S)."""
    block = max(1, int(STREAM_BLOCK_S * 1e6 / max(per_call_us, 1.0)))
    pairs = block if cuda else 0
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(pairs)
    ]
    samples: list[list[float]] = []
    deadline = time.monotonic() + STREAM_MAX_S
    while not os.path.exists(stop) and time.monotonic() < deadline:
        starts = []
        if cuda:
            for start, end in events:
                starts.append(time.monotonic())
                start.record()
                call()
                end.record()
            sync()
            timed = zip(starts, events, strict=True)
            samples += [[t, s.elapsed_time(e) * 1e3] for t, (s, e) in timed]
        else:
            for _ in range(block):
                t = time.monotonic()
                call()
                samples.append([t, (time.monotonic() - t) * 1e6])
    return samples


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
    stream = sys.argv[3:4] == ["--stream"]
    reps = int(sys.argv[3]) if len(sys.argv) > 3 and not stream else 0
    path, qualname = spec.split("::")
    module_spec = importlib.util.spec_from_file_location("workload", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    fn = getattr(module, qualname)
    args = getattr(module, qualname + "_inputs")(device=device_name)
    device = torch.device(device_name)
    cuda = device.type == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    def call() -> Any:
        return fn(*args)

    job = TimingJob(torch, reps)
    per_call = warm_up(job, call, sync)
    if stream:
        print("ready", flush=True)
        samples = stream_calls(torch, call, sync, cuda, per_call, sys.argv[4])
        with open(sys.argv[5], "w") as f:
            json.dump({"samples": samples, "warmup_us_per_call": per_call, "cpu": last_cpu()}, f)
        return
    timing = unprofiled_timing(job, call, sync, device, per_call)
    out = {"us_per_call": timing["us_per_call"], "reps": timing["reps"], "cpu": last_cpu()}
    out["window_s"] = timing["window_s"]
    print(json.dumps(out | {"warmup_us_per_call": per_call}))


if __name__ == "__main__":
    main()
