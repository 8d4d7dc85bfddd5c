"""Why checkpointed's fresh processes differ by up to 34 % at the host's speed
(tenth/host_timing_b.txt): one fresh process per run, its threads free or pinned (``same``:
all on one vCPU; ``split``: the main thread on one, the rest on another), three windows of
150 calls (each synchronized); per window the median and p10 per call and, per thread that
ran, its name, its last vCPU and its CPU time (ticks of 10 ms). Run on the GPU host:
python3 docs/h200-run/tenth/checkpointed_threads.py free|same|split"""

import os
import runpy
import statistics
import sys
import time

import torch

names = runpy.run_path("fixtures/workloads/host_timing.py")
fn = names["checkpointed"]
args = names["checkpointed_inputs"](device="cuda")


def threads():
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/self/task/{tid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        out[int(tid)] = (comm, int(fields[36]), int(fields[11]) + int(fields[12]))
    return out


for _ in range(50):
    fn(*args)
torch.cuda.synchronize()
mode = sys.argv[1]
main = os.getpid()
if mode != "free":
    for tid in threads():
        cpu = 3 if mode == "same" or tid == main else 4
        os.sched_setaffinity(tid, {cpu})
for w in range(3):
    before = threads()
    per = []
    t = time.perf_counter()
    for _ in range(150):
        s = time.perf_counter()
        fn(*args)
        torch.cuda.synchronize()
        per.append((time.perf_counter() - s) * 1e6)
    wall = time.perf_counter() - t
    after = threads()
    busy = [
        (name, cpu, ticks - before.get(tid, (0, 0, 0))[2], "main" if tid == main else tid)
        for tid, (name, cpu, ticks) in after.items()
        if ticks - before.get(tid, (0, 0, 0))[2] > 0
    ]
    p10 = sorted(per)[len(per) // 10]
    print(
        f"{mode} pid {main} window {w}: median {statistics.median(per):.0f} p10 {p10:.0f} "
        f"µs, wall {wall:.2f} s; threads {busy}",
        flush=True,
    )
