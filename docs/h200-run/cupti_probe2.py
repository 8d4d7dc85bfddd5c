"""Probe (GPU host): which scheduled session, as the worker runs it, leaves the next session
without GPU activity under TEARDOWN_CUPTI=1? Usage: python cupti_probe2.py VARIANT."""

import json
import os
import sys
import tempfile

os.environ.setdefault("TEARDOWN_CUPTI", "1")
os.environ.setdefault("KINETO_LOG_LEVEL", "99")
import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

variant = sys.argv[1]
ACTS = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
a = torch.randn(2048, 2048, device="cuda")


def kernels(path):
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    os.unlink(path)
    return sum(1 for e in events if e.get("cat") == "kernel")


def plain():
    path = tempfile.mktemp(suffix=".json")
    with profile(activities=ACTS) as p:
        torch.cuda.synchronize()
        for _ in range(3):
            with record_function("ks:line:0"):
                a @ a
        torch.cuda.synchronize()
    p.export_chrome_trace(path)
    return kernels(path)


def worker_schedule(flops=True, stack=True, averages=True):
    path = tempfile.mktemp(suffix=".json")
    with profile(
        activities=ACTS,
        schedule=schedule(wait=1, warmup=3, active=5, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(path),
        record_shapes=True,
        with_stack=stack,
        with_flops=flops,
    ) as prof:
        for i in range(9):
            with record_function("ks:call"):
                a @ a
            if i in (3, 8):
                torch.cuda.synchronize()
            prof.step()
    if averages:
        prof.key_averages()
    return kernels(path)


with profile(activities=ACTS, record_shapes=True, with_stack=True):  # the worker's warm-up
    (a + a).sum()
out = {"variant": variant, "cold": plain()}
kw = {"noflops": {"flops": False}, "nostack": {"stack": False}, "noavg": {"averages": False}}
out["schedule"] = worker_schedule(**kw.get(variant, {}))
if variant == "dummy":
    with profile(activities=ACTS):
        pass
out["lines"] = plain()
out["next_cold"] = plain()
print(json.dumps(out))
