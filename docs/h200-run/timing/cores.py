"""Is the host-bound level a property of the CPU a process runs on? (issue 24, item 5)

One process builds a host-timing workload, warms it up, then in rounds moves itself to each
CPU it may run on (os.sched_setaffinity), settles 0.1 s there and times 0.3 s of calls back
to back (CUDA events per call, as the worker does). A level that follows the CPU, the same
in every round, is the host's, not the process's; one that follows the round is a spell.

    python3 cores.py PATH::FUNC DEVICE [ROUNDS]   (tests/ on PYTHONPATH: env.sh puts it there)
"""

from __future__ import annotations

import os
import statistics
import sys
import time


def main() -> None:
    import torch

    from support.fresh_timing import load_workload

    spec, device_name = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    qualname = spec.split("::")[1]
    fn, args = load_workload(spec, device_name)
    cuda = device_name.startswith("cuda")

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def timed(seconds: float) -> list[float]:
        out: list[float] = []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            if cuda:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn(*args)
                b.record()
                b.synchronize()
                out.append(a.elapsed_time(b) * 1e3)
            else:
                t = time.perf_counter()
                fn(*args)
                out.append((time.perf_counter() - t) * 1e6)
        return out

    timed(1.0)  # warm: compile, caches
    allowed = sorted(os.sched_getaffinity(0))
    table: dict[int, list[float]] = {c: [] for c in allowed}
    for r in range(rounds):
        order = allowed if r % 2 == 0 else allowed[::-1]
        for cpu in order:
            os.sched_setaffinity(0, {cpu})
            timed(0.1)
            sync()
            table[cpu].append(statistics.median(timed(0.3)))
    os.sched_setaffinity(0, set(allowed))
    print(f"== {qualname} on {device_name}: median us per call, by CPU, {rounds} rounds")
    for cpu in allowed:
        levels = " ".join(f"{v:9.1f}" for v in table[cpu])
        print(f"cpu {cpu:3d} {levels}   median {statistics.median(table[cpu]):9.1f}")
    meds = [statistics.median(v) for v in table.values()]
    print(f"max/min over CPUs {max(meds) / min(meds):.3f}")


if __name__ == "__main__":
    main()
