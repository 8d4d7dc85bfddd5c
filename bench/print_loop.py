"""A loop body that prints a line every call, flushed: the worker's unprofiled time against
a fresh process's, in alternation, in one run.

The worker keeps what user code prints (worker/program/output.py). It drained a pipe with a
thread of its own, and each flushed line woke that thread to take the GIL from the user's
code (docs/cpu-run/loop_mark_2026-12-05.md). This bench times the bodies of
bench/workloads/print_loop.py: ``print_small`` (~15 µs of Python and a line),
``print_step`` (~150 µs and a line) and ``quiet_step`` (``print_step`` silent), alternating
(worker, fresh, worker, fresh, ...):

- worker: a whole ``kernelscope profile --json``, its ``timing.unprofiled_us_per_call``;
- fresh: tests/support/fresh_timing.py, the worker's own warm-up and timing with the same
  count of calls, its output into a file (as a program's redirected to a log), where no
  other process reads it as it goes.

It prints each pair's ratio, the ratio of the medians and the geometric mean of the pair
ratios (the host's slow spells mostly cancel in the last).

    python bench/print_loop.py [--pairs N] [workload ...]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORKLOAD = REPO / "bench" / "workloads" / "print_loop.py"
FRESH = REPO / "tests" / "support" / "fresh_timing.py"


def run(argv: list[str]) -> str:
    """`argv`'s stdout (through a file), run with the repository's server/ first on the path."""
    path = os.pathsep.join(p for p in (str(REPO / "server"), os.environ.get("PYTHONPATH")) if p)
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.run(
            argv,
            check=False,
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            env=os.environ | {"PYTHONPATH": path},
            cwd=REPO,
            timeout=600,
        )
        if proc.returncode != 0:
            sys.exit(f"{' '.join(argv[:4])} failed:\n{proc.stderr[-2000:]}")
        out.seek(0)
        return out.read()


def worker(spec: str) -> tuple[float, int, str]:
    """The worker's µs per call, its count of calls and which worker timed them."""
    argv = [sys.executable, "-m", "kernelscope.cli.main", "profile", spec, "--device", "cpu"]
    timing = json.loads(run([*argv, "--json", "--no-lines", "--no-memory"]))["timing"]
    return timing["unprofiled_us_per_call"], timing["unprofiled_reps"], timing["unprofiled_process"]


def fresh(spec: str, reps: int) -> float:
    """A fresh process's µs per call over `reps` calls (its JSON is its last line)."""
    out = run([sys.executable, str(FRESH), spec, "cpu", str(reps)])
    return float(json.loads(out.splitlines()[-1])["us_per_call"])


def main() -> None:
    """Alternate the two for each workload; print the pairs and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("workloads", nargs="*", default=["print_small", "print_step", "quiet_step"])
    opts = parser.parse_args()
    print(f"{'workload':11s} {'calls':>6s}  {'worker µs':>9s} {'fresh µs':>9s} {'ratio':>6s}")
    for name in opts.workloads:
        spec = f"{WORKLOAD}::{name}"
        in_worker: list[float] = []
        alone: list[float] = []
        for _ in range(opts.pairs):
            w, reps, where = worker(spec)
            f = fresh(spec, reps)
            in_worker.append(w)
            alone.append(f)
            print(
                f"{name:11s} {reps:>6d}  {w:>9.1f} {f:>9.1f} {w / f:>6.3f}  ({where})", flush=True
            )
        geo = math.exp(
            statistics.fmean(math.log(w / f) for w, f in zip(in_worker, alone, strict=True))
        )
        medians = statistics.median(in_worker) / statistics.median(alone)
        print(f"{name:11s} ratio of medians {medians:.3f}, geometric mean of pairs {geo:.3f}")


if __name__ == "__main__":
    main()
