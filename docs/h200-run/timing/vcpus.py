"""Is a vCPU's speed a property of the vCPU (where the host runs it) or of the moment? A
thread pinned to each CPU in turn runs the worker's reference loop (3 x 1000 iterations)
back to back for HOLD seconds there: the median and best loop per CPU, ROUNDS rounds.

    python3 vcpus.py [ROUNDS] [HOLD]
"""

import os
import statistics
import sys
import time


def loop_us():
    t = time.perf_counter()
    total = 0
    for i in range(1000):
        total += i * i
    return (time.perf_counter() - t) * 1e6


rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
hold = float(sys.argv[2]) if len(sys.argv) > 2 else 0.3
cpus = sorted(os.sched_getaffinity(0))
print("round " + " ".join(f"cpu{c:<3d}" for c in cpus) + "  (median µs of a 1000-iteration loop)")
for r in range(rounds):
    row = []
    for c in cpus:
        os.sched_setaffinity(0, {c})
        loop_us()
        end = time.perf_counter() + hold
        xs = []
        while time.perf_counter() < end:
            xs.append(loop_us())
        row.append(statistics.median(xs))
    print(f"{r:5d} " + " ".join(f"{x:6.1f}" for x in row), flush=True)
