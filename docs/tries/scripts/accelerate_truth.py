"""tests/workloads/accelerate_program.py as `accelerate launch` runs it, its train_step timed
by perf_counter in a fresh process that never profiled (calls 50 on). Run from the folder
that holds the program:

    accelerate launch [options] accelerate_truth.py [the program's arguments]
"""

import statistics
import sys
import time

sys.path.insert(0, ".")
import accelerate_program

original = accelerate_program.train_step
spans = []


def timed(*args):
    start = time.perf_counter()
    out = original(*args)
    spans.append(time.perf_counter() - start)
    return out


accelerate_program.train_step = timed
sys.argv = ["accelerate_program.py", *sys.argv[1:]]
accelerate_program.main()
us = sorted(s * 1e6 for s in spans[50:])
print(f"train_step {statistics.median(us):.1f} us median of {len(us)}, perf_counter, fresh")
