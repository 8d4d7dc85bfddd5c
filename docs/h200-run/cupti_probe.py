"""Probe (run on the GPU host): does each profiling session in one process still record GPU
activity, with and without TEARDOWN_CUPTI=1, and how much slower is host-bound code after
a session? Usage: python cupti_probe.py 1|0|unset  (prints one JSON line)."""

import json
import os
import statistics
import sys
import tempfile
import time

mode = sys.argv[1]
if mode != "unset":
    os.environ["TEARDOWN_CUPTI"] = mode
os.environ.setdefault("KINETO_LOG_LEVEL", "99")
import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function, schedule  # noqa: E402

ACTS = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
a = torch.randn(2048, 2048, device="cuda")
xs = [torch.randn(256, device="cuda") for _ in range(100)]


def work():
    return a @ a


def host_bound_us():
    torch.cuda.synchronize()
    samples = []
    for _ in range(30):
        t = time.perf_counter()
        for x in xs:
            x.mul_(1.0001)
        samples.append((time.perf_counter() - t) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(samples)


def kernels(path):
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    os.unlink(path)
    return sum(1 for e in events if e.get("cat") == "kernel")


def plain(trace_lines=False):
    path = tempfile.mktemp(suffix=".json")
    with profile(activities=ACTS) as p:
        if trace_lines:
            sys.settrace(lambda f, e, a: None)
        try:
            for _ in range(3):
                with record_function("ks:line:0"):
                    work()
        finally:
            sys.settrace(None)
        torch.cuda.synchronize()
    p.export_chrome_trace(path)
    return kernels(path)


def scheduled():
    path = tempfile.mktemp(suffix=".json")
    with profile(
        activities=ACTS,
        schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(path),
        record_shapes=True,
        with_stack=True,
    ) as p:
        for _ in range(5):
            work()
            torch.cuda.synchronize()
            p.step()
    return kernels(path)


for _ in range(20):
    work()
host = {"before": host_bound_us()}
sessions = []
for kind in ["plain", "scheduled", "lines", "plain", "scheduled", "lines", "plain"]:
    n = {"plain": plain, "scheduled": scheduled, "lines": lambda: plain(True)}[kind]()
    sessions.append((kind, n))
    host.setdefault("after_" + kind, host_bound_us())
print(
    json.dumps(
        {
            "TEARDOWN_CUPTI": mode,
            "torch": torch.__version__,
            "sessions": sessions,
            "host_bound_us": host,
        }
    )
)
