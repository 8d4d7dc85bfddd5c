"""Every per-call sample of a host-bound call's timing in a fresh process, in order, so
estimators can be compared offline (issue 24, item 5: the host's slow spells).

    python3 docs/h200-run/timing/blocks.py fixtures/workloads/host_timing.py::churn SECONDS

Warms up as the worker does (its warm_up), then times calls back to back with CUDA events for
SECONDS, and prints one JSON line: the samples (µs) and the per-call host clock marks."""

import importlib.util
import json
import sys
import time

import torch
from fresh_timing import TimingJob  # tests/support on PYTHONPATH

from kernelscope.worker.program.timing import warm_up

spec, seconds = sys.argv[1], float(sys.argv[2])
path, name = spec.split("::")
mspec = importlib.util.spec_from_file_location("workload", path)
module = importlib.util.module_from_spec(mspec)
mspec.loader.exec_module(module)
fn = getattr(module, name)
args = getattr(module, name + "_inputs")(device="cuda")


def call():
    return fn(*args)


def sync():
    torch.cuda.synchronize()


job = TimingJob(torch, 0)
per_call = warm_up(job, call, sync)
n = max(20, int(seconds * 1e6 / max(per_call, 1.0)))
events = [
    (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)
]
marks = []
t0 = time.perf_counter()
for s, e in events:
    s.record()
    call()
    e.record()
    marks.append(time.perf_counter() - t0)
sync()
samples = [s.elapsed_time(e) * 1e3 for s, e in events]
print(json.dumps({"fn": name, "warmup_us": per_call, "samples": samples, "marks": marks}))
