"""Is a host-bound call's time a property of the vCPU it runs on? One process, the thread
moved over every vCPU in turn (sched_setaffinity), three sweeps; per vCPU: the reference
loop (the worker's timing.reference_us: 1000 iterations of pure Python), the host's µs per
launch of a 1-element add_ (perf_counter over 500 launches, no sync inside), and the
compiled LayerNorm of what_if_gpu.py (200 calls back to back between CUDA events) - first
compiled alone, then beside a reduce-overhead compile of the same function (two cache
entries on one code object, as try and the hand script build them). Run on the GPU host:
python3 docs/h200-run/tenth/cpu_sweep.py"""

import os
import runpy
import statistics
import time

import torch

names = runpy.run_path("fixtures/workloads/what_if_gpu.py")
fn = names["layernorm"]
args = names["layernorm_inputs"](device="cuda")
one = torch.zeros(1, device="cuda")


def loop_us():
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        total = 0
        for i in range(1000):
            total += i * i
        best = min(best, time.perf_counter() - t)
    return best * 1e6


def launch_us(n=500):
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        one.add_(1)
    host = (time.perf_counter() - t) * 1e6 / n
    torch.cuda.synchronize()
    return host


def block(call, n=200):
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = time.perf_counter()
    s.record()
    for _ in range(n):
        call()
    e.record()
    host = (time.perf_counter() - t) * 1e6 / n
    e.synchronize()
    return s.elapsed_time(e) * 1e3 / n, host


c = torch.compile(fn)
for _ in range(30):
    c(*args)
torch.cuda.synchronize()
cpus = sorted(os.sched_getaffinity(0))
print("cpus", cpus, "pid", os.getpid())


def sweep(label, calls):
    rows = {}
    for k in cpus:
        os.sched_setaffinity(0, {k})
        time.sleep(0.02)
        loop = loop_us()
        launch = launch_us()
        got = {name: block(call) for name, call in calls.items()}
        rows[k] = (loop, launch, got)
        text = " ".join(f"{n} ev {g[0]:.1f} host {g[1]:.1f}" for n, g in got.items())
        print(f"{label} cpu {k:2d}: loop {loop:.1f} launch {launch:.2f} | {text}", flush=True)
    return rows


base = {"baseline": lambda: fn(*args), "compile": lambda: c(*args)}
alone = [sweep(f"alone{i}", base) for i in range(2)]
g = torch.compile(fn, mode="reduce-overhead")
for _ in range(30):
    g(*args)
torch.cuda.synchronize()
both = [sweep(f"both{i}", {**base, "graphs": lambda: g(*args)}) for i in range(2)]
os.sched_setaffinity(0, set(cpus))
for label, sweeps in (("alone", alone), ("both", both)):
    comp = [r[k][2]["compile"][0] for r in sweeps for k in cpus]
    loops = [r[k][0] for r in sweeps for k in cpus]
    print(
        f"{label}: compile ev median {statistics.median(comp):.1f} min {min(comp):.1f} "
        f"max {max(comp):.1f}; loop median {statistics.median(loops):.1f} min {min(loops):.1f}"
    )
