"""Truth for pytorch/examples' imagenet `main.py` (run from its folder, in a fresh process
that never profiled): its own source, with one line added as the first of the training
loop's body that stamps `perf_counter()`; after TRUTH_N stamps it prints the iterations'
times (ms) to stderr and exits. Same argv as the program's:

    TRUTH_N=22 python imagenet_truth.py -a mobilenet_v3_small --dummy -b 8 -j 2 --epochs 1

With `accuracy` as the first argument it times `main.accuracy(output, target, topk=(1, 5))`
on the shapes the training loop passes at -b 8 (output [8, 1000] float32, target [8] int64),
back to back for 2 s after 200 calls, and prints the median (µs).
"""

import json
import os
import statistics
import sys
import time

LOOP = "    for i, (images, target) in enumerate(train_loader):\n"


def loop_truth() -> None:
    with open("main.py") as f:
        source = f.read()
    assert LOOP in source, "the training loop's line is not as expected"
    stamp = (
        "        _T.append(time.perf_counter())\n"
        "        if len(_T) > _N:\n"
        "            print('TRUTH', json.dumps({'iters_ms': [(b - a) * 1e3 for a, b in "
        "zip(_T, _T[1:])]}), file=sys.stderr, flush=True)\n"
        "            os._exit(0)\n"
    )
    source = source.replace(LOOP, LOOP + stamp, 1)
    sys.argv = ["main.py", *sys.argv[1:]]
    scope = {"__name__": "__main__", "__file__": "main.py", "_T": [], "json": json, "sys": sys,
             "_N": int(os.environ.get("TRUTH_N", "25"))}  # fmt: skip
    exec(compile(source, "main.py", "exec"), scope)


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
    if sys.argv[1:2] == ["accuracy"]:
        accuracy_truth()
    else:
        loop_truth()
