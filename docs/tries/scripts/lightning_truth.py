"""Fresh-process truth for Lightning's example classifier (docs/tries/lightning_2026-12-05.md):
runs the script as ``python lightning_truth.py SCRIPT ARGS...`` would run ``SCRIPT ARGS...``,
with one perf_counter stamp around each ``training_step`` call and nothing else. Prints the
step's own time (median of calls 6 on, p10, p90) and the loop's iteration, start to start
(iterations 2-21, as kernelscope's --skip 21 times them, and 6 on). With NOLOG=1,
``self.log`` is a no-op: the difference is its cost; with TIMELOG=1 its calls are timed
themselves."""

import itertools
import os
import runpy
import statistics
import sys
import time

import lightning.pytorch as pl

times: list[float] = []
starts: list[float] = []
subclassed = pl.LightningModule.__init_subclass__


def timed_subclass(cls, **kwargs):
    subclassed(**kwargs)
    step = cls.__dict__.get("training_step")
    if step is not None:

        def training_step(self, *args, **kw):
            t = time.perf_counter()
            starts.append(t)
            try:
                return step(self, *args, **kw)
            finally:
                times.append(time.perf_counter() - t)

        cls.training_step = training_step
    if os.environ.get("NOLOG"):
        cls.log = lambda self, *args, **kw: None


pl.LightningModule.__init_subclass__ = classmethod(timed_subclass)
logged: list[float] = []
if os.environ.get("TIMELOG"):  # LightningModule.log's own calls, timed the same way
    log = pl.LightningModule.log

    def timed_log(self, *args, **kw):
        t = time.perf_counter()
        try:
            return log(self, *args, **kw)
        finally:
            logged.append(time.perf_counter() - t)

    pl.LightningModule.log = timed_log
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
finally:
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    steps = sorted(times[5:])
    err = sys.stderr
    print(f"TRUTH iterations 2-21 median {statistics.median(gaps[1:21]) * 1e6:.1f} us", file=err)
    print(f"TRUTH iteration (6 on) median {statistics.median(gaps[5:]) * 1e6:.1f} us", file=err)
    if logged:
        head, every = statistics.median(logged[1:21]), statistics.median(logged)
        print(f"TRUTH log calls 2-21 median {head * 1e6:.1f} us (all {len(logged)}: "
              f"{every * 1e6:.1f} us)", file=err)  # fmt: skip
    print(
        f"TRUTH training_step calls {len(times)} median {statistics.median(steps) * 1e6:.1f} us"
        f" p10 {steps[len(steps) // 10] * 1e6:.1f} p90 {steps[9 * len(steps) // 10] * 1e6:.1f}",
        file=err,
    )
