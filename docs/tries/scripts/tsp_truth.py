"""Truth for time_sequence_prediction, in a fresh process that never profiled: train.py's own
source (same argv) up to its loop, then seq(input) timed with perf_counter, 2 warm calls
first, median of 10.

Run from time_sequence_prediction/: python tsp_truth.py --steps 1
"""

import statistics
import sys
import time
from pathlib import Path
from typing import Any

source = Path("train.py").read_text()
head = source[: source.index("    #begin to train")]
sys.argv = ["train.py", *sys.argv[1:]]
program: dict[str, Any] = {"__name__": "__main__", "__file__": "train.py"}
exec(compile(head, "train.py", "exec"), program)
seq, inputs = program["seq"], program["input"]
for _ in range(2):
    seq(inputs)
samples: list[float] = []
for _ in range(10):
    t = time.perf_counter()
    seq(inputs)
    samples.append((time.perf_counter() - t) * 1e3)
print(
    f"seq(input) {statistics.median(samples):.1f} ms median of {len(samples)} "
    f"(min {min(samples):.1f}, max {max(samples):.1f})"
)
