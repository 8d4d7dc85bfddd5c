"""Issue 24, item 5 on the H200: is a host-bound call's slow mode a property of the process
(where its threads landed) or of the moment? One fresh process times the workload in 12
blocks of ~0.4 s, printing each block's median, the CPU the main thread ended the block on,
and which of the process's threads used CPU time during the block.

    python docs/h200-run/timing/modes.py PATH::FUNC
"""

import importlib.util
import os
import statistics
import sys
import time

import torch


def threads():
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                rest = f.read().rpartition(")")[2].split()
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            out[tid] = (name, int(rest[11]) + int(rest[12]), int(rest[36]))
        except OSError:
            pass
    return out


spec = sys.argv[1]
path, qual = spec.split("::")
m = importlib.util.spec_from_file_location("w", path)
mod = importlib.util.module_from_spec(m)
m.loader.exec_module(mod)
fn, args = getattr(mod, qual), getattr(mod, qual + "_inputs")(device="cuda")
for _ in range(200):
    fn(*args)
torch.cuda.synchronize()
main = str(os.getpid())
for block in range(12):
    before = threads()
    samples = []
    t_end = time.perf_counter() + 0.4
    while time.perf_counter() < t_end:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(*args)
        e.record()
        samples.append((s, e))
    torch.cuda.synchronize()
    after = threads()
    us = statistics.median(s.elapsed_time(e) * 1e3 for s, e in samples)
    busy = sorted(
        (
            (after[t][1] - before.get(t, (0, 0, 0))[1], after[t][0], after[t][2])
            for t in after
            if t != main
        ),
        reverse=True,
    )[:3]
    ticks = after[main][1] - before[main][1]
    print(
        f"block {block:2d} {us:8.1f} us  main on cpu {after[main][2]:2d} ticks {ticks:3d}"
        f"  other threads (ticks, name, cpu): {busy}",
        flush=True,
    )
