"""Truth for a DataLoader's next() inside a program's own loop, in a fresh process that never
profiled: every DataLoader iterator's ``__next__`` is wrapped to time it, then the program
runs as its ``__main__`` with its own argv; after 22 calls it prints the median and mean of
calls 3-22 (ms) to stderr and exits. Run from the program's folder:

    python next_truth.py main.py --epochs 1 --no-accel
"""

import runpy
import statistics
import sys
import time

from torch.utils.data.dataloader import _BaseDataLoaderIter

original = _BaseDataLoaderIter.__next__
times: list[float] = []


def timed(it):  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    try:
        return original(it)
    finally:
        times.append((time.perf_counter() - t) * 1e3)
        if len(times) == 22:
            print(
                f"next() ms, calls 3-22: median {statistics.median(times[2:]):.2f} "
                f"mean {statistics.mean(times[2:]):.2f}",
                file=sys.stderr,
            )
            raise SystemExit


_BaseDataLoaderIter.__next__ = timed  # type: ignore[method-assign]
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
