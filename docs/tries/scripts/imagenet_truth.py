"""Truth for pytorch/examples' imagenet `main.py`'s `accuracy` (run from its folder, in a
fresh process that never profiled): `main.accuracy(output, target, topk=(1, 5))` on the
shapes the training loop passes at -b 8 (output [8, 1000] float32, target [8] int64), back
to back for 2 s after 200 calls; prints the median (µs). The loop's truth is
`loop_truth.py main.py 327 ...`.
"""

import json
import os
import statistics
import sys
import time


def accuracy_truth() -> None:
    import torch

    sys.path.insert(0, os.getcwd())
    sys.argv = ["main.py"]
    import main  # its __main__ guard keeps the program from running

    out, tgt = torch.randn(8, 1000), torch.randint(0, 1000, (8,))
    for _ in range(200):
        main.accuracy(out, tgt, topk=(1, 5))
    samples = []
    end = time.perf_counter() + 2.0
    while time.perf_counter() < end:
        t = time.perf_counter()
        main.accuracy(out, tgt, topk=(1, 5))
        samples.append((time.perf_counter() - t) * 1e6)
    print(json.dumps({"median_us": statistics.median(samples), "n": len(samples)}))


if __name__ == "__main__":
    accuracy_truth()
