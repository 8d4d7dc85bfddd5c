"""Is a slow spell of the timing thread the hypervisor's (steal time) or the guest's (run
queue wait)? A pure-Python reference loop (3 x 1000 iterations, as the worker's) runs back
to back for SECONDS; every 50 ms one line: the loop's best in that window (µs), the CPU the
thread is on, that CPU's steal and the whole guest's (jiffies, /proc/stat), and the
thread's run-queue wait (ns, /proc/thread-self/schedstat).

    python3 steal.py [SECONDS]
"""

import sys
import time


def loop_us():
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        total = 0
        for i in range(1000):
            total += i * i
        best = min(best, time.perf_counter() - t)
    return best * 1e6


def steal():
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu"):
                parts = line.split()
                out[parts[0]] = int(parts[8])
    return out


def cpu_now():
    with open("/proc/thread-self/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


def wait_ns():
    with open("/proc/thread-self/schedstat") as f:
        return int(f.read().split()[1])


seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
end = time.perf_counter() + seconds
print("t_s loop_us cpu steal_cpu steal_all runq_wait_us")
t0 = time.perf_counter()
s0, w0 = steal(), wait_ns()
while time.perf_counter() < end:
    window = time.perf_counter() + 0.05
    best = float("inf")
    while time.perf_counter() < window:
        best = min(best, loop_us())
    cpu = cpu_now()
    s1, w1 = steal(), wait_ns()
    print(
        f"{time.perf_counter() - t0:6.2f} {best:6.1f} {cpu:3d} "
        f"{s1[f'cpu{cpu}'] - s0[f'cpu{cpu}']:4d} {s1['cpu'] - s0['cpu']:4d} {(w1 - w0) / 1e3:8.1f}"
    )
    s0, w0 = s1, w1
