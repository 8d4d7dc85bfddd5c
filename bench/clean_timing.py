"""The clean worker's unprofiled time against fresh processes, in alternation, in one run.

Issue 24, item 5: the worker that never profiles must time a host-bound call as a fresh
process does. A host's slow spells (on the lent H200, ~1.5x for seconds at a time:
docs/h200-run/timing/estimators_2026-12-03.txt) decide single comparisons, so this bench
alternates them (CLI, fresh, CLI, fresh, ...) and prints each pair's ratio, the ratio of
the medians and the geometric mean of the pair ratios: a bias of the worker shows in the
last, the host's spells mostly cancel there.

Each CLI run is a whole ``kernelscope profile --json``, its figure the clean worker's. On a
machine without a GPU the launcher times no call again, so the bench makes it (it patches
``host_bound`` and ``gpu_here`` in the CLI's process, nothing else). The fresh process is
tests/support/fresh_timing.py: the worker's own warm-up and timing, the same count of calls.

    python bench/clean_timing.py [--device cpu|cuda] [--pairs N] [workload ...]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORKLOADS = REPO / "fixtures" / "workloads" / "host_timing.py"
FRESH = REPO / "tests" / "support" / "fresh_timing.py"
CLI = """
import sys
import kernelscope.engine.launcher as launcher
launcher.host_bound = lambda finished: True
launcher.gpu_here = lambda: True
from kernelscope.cli.main import main
raise SystemExit(main(sys.argv[1:]))
"""


def env() -> dict[str, str]:
    """This environment with the repository's server/ first on the path."""
    path = os.pathsep.join(p for p in (str(REPO / "server"), os.environ.get("PYTHONPATH")) if p)
    return os.environ | {"PYTHONPATH": path}


def cli(spec: str, device: str) -> tuple[float, int, str]:
    """The clean worker's µs per call, its count of calls and where it ran."""
    argv = [sys.executable, "-c", CLI, "profile", spec, "--device", device, "--json"]
    argv += ["--no-lines", "--no-memory"]
    proc = subprocess.run(
        argv, check=False, capture_output=True, text=True, env=env(), cwd=REPO, timeout=600
    )
    if proc.returncode != 0:
        sys.exit(f"kernelscope profile {spec} failed:\n{proc.stderr[-2000:]}")
    timing = json.loads(proc.stdout)["timing"]
    return timing["unprofiled_us_per_call"], timing["unprofiled_reps"], timing["unprofiled_process"]


def fresh(spec: str, device: str, reps: int) -> float:
    """A fresh process's µs per call over `reps` calls."""
    argv = [sys.executable, str(FRESH), spec, device, str(reps)]
    proc = subprocess.run(
        argv, check=False, capture_output=True, text=True, env=env(), cwd=REPO, timeout=600
    )
    if proc.returncode != 0:
        sys.exit(f"fresh timing of {spec} failed:\n{proc.stderr[-2000:]}")
    return float(json.loads(proc.stdout)["us_per_call"])


def main() -> None:
    """Alternate the two for each workload; print the pairs and the ratios."""
    parser = argparse.ArgumentParser(description="Clean worker against fresh processes.")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument(
        "workloads", nargs="*", default=["graph_break", "checkpointed", "loader_step"]
    )
    opts = parser.parse_args()
    print(f"{'workload':13s} {'calls':>6s}  {'clean µs':>9s} {'fresh µs':>9s} {'ratio':>6s}")
    for name in opts.workloads:
        spec = f"{WORKLOADS}::{name}"
        ratios: list[float] = []
        clean: list[float] = []
        alone: list[float] = []
        for _ in range(opts.pairs):
            c, reps, where = cli(spec, opts.device)
            f = fresh(spec, opts.device, reps)
            clean.append(c)
            alone.append(f)
            ratios.append(c / f)
            print(
                f"{name:13s} {reps:>6d}  {c:>9.1f} {f:>9.1f} {c / f:>6.3f}  ({where})", flush=True
            )
        geo = math.exp(statistics.fmean(math.log(r) for r in ratios))
        medians = statistics.median(clean) / statistics.median(alone)
        print(f"{name:13s} ratio of medians {medians:.3f}, geometric mean of pairs {geo:.3f}")


if __name__ == "__main__":
    main()
