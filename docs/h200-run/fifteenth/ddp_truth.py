"""tests/workloads/ddp_program.py as torchrun runs it, its train_step timed by CUDA events in
a fresh process that never profiled (each call between its own pair of events, calls 50 on):
the truth for `kernelscope profile ... --via "torchrun ..."` on a GPU.

    torchrun --nproc-per-node 1 docs/h200-run/fifteenth/ddp_truth.py --device cuda ...
"""

import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "workloads"))
import ddp_program

original = ddp_program.train_step
spans = []


def timed(*args):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    out = original(*args)
    end.record()
    spans.append((start, end))
    return out


ddp_program.train_step = timed
sys.argv = ["ddp_program.py", *sys.argv[1:]]
ddp_program.main()
torch.cuda.synchronize()
us = sorted(s.elapsed_time(e) * 1e3 for s, e in spans[50:])
p10, p90 = us[len(us) // 10], us[9 * len(us) // 10]
print(
    f"rank {os.environ['RANK']}: train_step {statistics.median(us):.1f} us median of {len(us)} "
    f"(p10 {p10:.1f}, p90 {p90:.1f}), cuda events, fresh"
)
