"""time_sequence_prediction's call under a plain torch.profiler in a fresh process, with and
without shapes, FLOPs and stacks: the four ops of most self CPU time each way.

Run from time_sequence_prediction/: python tsp_ops.py
"""

import sys
import time
from pathlib import Path
from typing import Any

from torch.profiler import ProfilerActivity, profile

source = Path("train.py").read_text()
head = source[: source.index("    #begin to train")]
sys.argv = ["train.py", "--steps", "1"]
program: dict[str, Any] = {"__name__": "__main__", "__file__": "train.py"}
exec(compile(head, "train.py", "exec"), program)
seq, inputs = program["seq"], program["input"]
for _ in range(2):
    seq(inputs)
for stack, flops, shapes in (
    (False, False, False),
    (False, False, True),
    (False, True, True),
    (True, True, True),
):
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=shapes,
        with_stack=stack,
        with_flops=flops,
    ) as prof:
        t = time.perf_counter()
        seq(inputs)
        took = time.perf_counter() - t
    print(f"stack {stack} flops {flops} shapes {shapes} call {took * 1e3:.0f} ms")
    averages = prof.key_averages(group_by_input_shape=True)
    for e in sorted(averages, key=lambda e: -e.self_cpu_time_total)[:4]:
        shape = str(e.input_shapes)[:40]
        ms = e.self_cpu_time_total / 1e3
        print(f"  {e.key:<16} {shape:<40} n={e.count} self={ms:.1f} ms")
