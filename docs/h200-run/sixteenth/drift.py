"""Each call's wall in a fresh process, call after call (synchronized), to see whether a
training step's time drifts with the count of calls before it; then the worker's own warm-up
and timing in the same process (as tests/support/fresh_timing.py does).

    PYTHONPATH=server:tests/support python drift.py PATH::FUNC [CALLS] [DEVICE]
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch
from fresh_timing import TimingJob, load_workload

from kernelscope.worker.program.timing import reference_us, unprofiled_timing, warm_up


def main() -> None:
    spec = sys.argv[1]
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    device = sys.argv[3] if len(sys.argv) > 3 else "cuda"
    fn, args = load_workload(spec, device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    walls, refs = [], []
    for _ in range(calls):
        t = time.perf_counter()
        fn(*args)
        sync()
        walls.append((time.perf_counter() - t) * 1e6)
        refs.append(reference_us())
    job = TimingJob(torch, 0)
    per_call = warm_up(job, lambda: fn(*args), sync)
    timing = unprofiled_timing(job, lambda: fn(*args), sync, torch.device(device), per_call)
    by_20 = range(0, calls, 20)
    out = {
        "spec": spec,
        "median_by_20": [round(statistics.median(walls[i : i + 20])) for i in by_20],
        "first10": [round(w) for w in walls[:10]],
        "ref_by_20": [round(min(refs[i : i + 20]), 1) for i in by_20],
        "ref_median_by_20": [round(statistics.median(refs[i : i + 20]), 1) for i in by_20],
        "after_us_per_call": round(timing["us_per_call"]),
        "after_reps": timing["reps"],
        "after_slowed": timing["slowed"],
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
