"""Issue 24, item 5 on the H200: does a host-bound call's slow mode follow the GPU (its SM
clock, power state) or the CPU? One fresh process times each workload in blocks of 0.15 s,
and after each block times 0.05 s of pure Python (no GPU) in the same thread; nvidia-smi
samples the GPU every 20 ms beside it. Prints per block: the workload's median, the pure
Python's, and the GPU's mean SM clock, power and P-state over the block.

    python docs/h200-run/timing/clocks.py SECONDS PATH::FUNC...
"""

import datetime
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests"))
from support.fresh_timing import last_cpu, load_workload


def python_block(seconds):
    """µs per 1000-iteration pure-Python loop, median over `seconds`."""
    out = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        s = 0
        for i in range(1000):
            s += i * i
        out.append((time.perf_counter() - t) * 1e6)
    return statistics.median(out)


def sync_tiny(x):
    """One tiny kernel and a sync: the GPU's launch-and-wait latency alone."""
    y = x + 1
    torch.cuda.synchronize()
    return y


def sync_tiny_inputs(device="cuda"):
    return (torch.ones(1, device=device),)


seconds = float(sys.argv[1])
smi = subprocess.Popen(
    [
        "nvidia-smi",
        "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,pstate,utilization.gpu",
        "--format=csv,noheader,nounits",
        "-lms",
        "20",
    ],
    stdout=subprocess.PIPE,
    text=True,
)
blocks = []
for spec in sys.argv[2:]:
    if spec == "sync_tiny":
        fn, args = sync_tiny, sync_tiny_inputs()
    else:
        fn, args = load_workload(spec, "cuda")
    for _ in range(100):
        fn(*args)
    torch.cuda.synchronize()
    end_all = time.time() + seconds
    while time.time() < end_all:
        t0 = time.time()
        samples = []
        end = time.perf_counter() + 0.15
        while time.perf_counter() < end:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn(*args)
            e.record()
            samples.append((s, e))
        torch.cuda.synchronize()
        t1 = time.time()
        py = python_block(0.05)
        us = statistics.median(s.elapsed_time(e) * 1e3 for s, e in samples)
        blocks.append((spec.rpartition("::")[2], t0, t1, us, py, last_cpu()))
smi.terminate()
rows = []
for line in smi.stdout.read().splitlines():
    parts = [p.strip() for p in line.split(",")]
    try:
        ts = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        rows.append((ts, float(parts[1]), float(parts[2]), float(parts[3]), parts[4], parts[5]))
    except (ValueError, IndexError):
        continue
print(f"{len(rows)} nvidia-smi samples; {len(blocks)} blocks")
print(
    f"{'workload':14} {'t':>6} {'us/call':>9} {'py us':>7} {'cpu':>3} {'sm MHz':>7} "
    f"{'mem MHz':>7} {'W':>6} pstate util"
)
start = blocks[0][1] if blocks else 0
for name, t0, t1, us, py, cpu in blocks:
    inside = [r for r in rows if t0 <= r[0] <= t1]
    if inside:
        sm = statistics.mean(r[1] for r in inside)
        mem = statistics.mean(r[2] for r in inside)
        w = statistics.mean(r[3] for r in inside)
        ps = "/".join(sorted({r[4] for r in inside}))
        util = "/".join(sorted({r[5] for r in inside}))
    else:
        sm = mem = w = float("nan")
        ps = util = "-"
    print(
        f"{name:14} {t0 - start:6.2f} {us:9.1f} {py:7.1f} {cpu:3d} {sm:7.0f} {mem:7.0f} "
        f"{w:6.1f} {ps} {util}"
    )
