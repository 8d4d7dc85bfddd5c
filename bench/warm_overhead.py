"""Warm-path overhead of `profile` against a cold script doing the same profiling.

Overhead = wall time of the whole job minus the function's own time (every call the job
makes, at the unprofiled per-call time). Both paths run here, side by side, several rounds;
medians are printed with their ratio. Targets (issue 2): warm overhead <= 0.3 s on CPU, and
>= 5x less than the cold script's.

    python bench/warm_overhead.py [--rounds N] [--n SIZE]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernelscope.engine.launcher import Launcher
from kernelscope.engine.targets import Schedule, build_request, load_target

REPO = Path(__file__).resolve().parent.parent
TARGET = f"{REPO}/fixtures/workloads/matmul_add.py::matmul_add"


async def warm_rounds(rounds: int, trace_dir: Path) -> list[tuple[float, float, float]]:
    """(wall, function's own time, one call's unprofiled time) per round, in seconds."""
    launcher = Launcher(python=sys.executable)
    await launcher.start()  # the editor's server keeps this worker warm
    target = load_target(TARGET)
    results: list[tuple[float, float, float]] = []
    try:
        for _ in range(rounds):
            request = build_request(target, trace_dir, Schedule(1, 3, 5))
            t0 = time.perf_counter()
            result = await launcher.profile(request)
            wall = time.perf_counter() - t0
            side = result.finished.sidecar
            calls = 1 + side.wait + side.warmup + side.active + side.timing.reps
            calls += min(side.active, 3)  # the line pass
            per_call = side.timing.us_per_call / 1e6
            results.append((wall, calls * per_call, per_call))
    finally:
        await launcher.close()
    return results


def cold_rounds(rounds: int, per_call_s: float) -> list[tuple[float, float]]:
    """(wall, function's own time) per cold run; the script makes 10 calls."""
    results: list[tuple[float, float]] = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, str(REPO / "bench" / "cold_script.py")],
            check=True,
            capture_output=True,
            env={**os.environ, "KINETO_LOG_LEVEL": "99"},
        )
        results.append((time.perf_counter() - t0, 10 * per_call_s))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=64, help="matrix size of the workload")
    args = parser.parse_args()
    os.environ["KS_MATMUL_N"] = str(args.n)
    with tempfile.TemporaryDirectory() as tmp:
        warm = asyncio.run(warm_rounds(args.rounds, Path(tmp)))
    cold = cold_rounds(args.rounds, statistics.median(c for _, _, c in warm))
    warm_over = statistics.median(w - o for w, o, _ in warm)
    cold_over = statistics.median(w - o for w, o in cold)
    warm_wall = statistics.median(w for w, _, _ in warm)
    warm_own = statistics.median(o for _, o, _ in warm)
    cold_wall = statistics.median(w for w, _ in cold)
    ratio = cold_over / warm_over
    print(f"workload: matmul_add n={args.n} on CPU, schedule 1/3/5, {args.rounds} rounds each")
    print(
        f"warm  profile on a warm worker: wall {warm_wall:.3f} s, own {warm_own:.3f} s, "
        f"overhead {warm_over:.3f} s"
    )
    print(f"cold  python bench/cold_script.py: wall {cold_wall:.3f} s, overhead {cold_over:.3f} s")
    verdict_abs = "met" if warm_over <= 0.3 else "MISSED"
    verdict_ratio = "met" if ratio >= 5 else "MISSED"
    print(
        f"ratio cold/warm overhead: {ratio:.1f}x  "
        f"(warm <= 0.300 s: {verdict_abs}; ratio >= 5x: {verdict_ratio})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
