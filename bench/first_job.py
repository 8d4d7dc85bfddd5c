"""A first job's wall time against the floor every job pays, in one run, side by side.

The floor is a fresh ``python -c "import torch; torch.zeros(1, device=DEV)"`` (torch's import
and the device's start: nothing can be faster). The first job is a whole ``kernelscope profile
--json`` of a host-bound workload (fixtures/workloads/host_bound.py, 100 tiny in-place ops:
on a GPU it is timed again in the worker that never profiles, so both workers' starts count).
The two run interleaved, ``--rounds`` times each; the report's stages say where the rest went.

    python bench/first_job.py [--device cpu|cuda] [--rounds N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TARGET = REPO / "fixtures" / "workloads" / "host_bound.py"


def floor_s(device: str) -> float:
    """Wall seconds of a fresh interpreter importing torch and touching the device."""
    code = f"import torch; torch.zeros(1, device={device!r}).sum().item()"
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - t


def first_job(device: str) -> tuple[float, dict[str, Any]]:
    """Wall seconds of one whole CLI profile, and its report (for the stages)."""
    argv = [sys.executable, "-m", "kernelscope", "profile", f"{TARGET}::many_small"]
    argv += ["--device", device, "--json"]
    t = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=REPO)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        sys.exit(f"kernelscope profile failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall, json.loads(proc.stdout)


def main() -> None:
    """Run the rounds, print each pair and the medians."""
    parser = argparse.ArgumentParser(description="A first job's wall time against the floor.")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the figures here")
    opts = parser.parse_args()
    os.environ.setdefault("KINETO_LOG_LEVEL", "99")
    floors: list[float] = []
    jobs: list[float] = []
    stages: list[dict[str, float]] = []
    print(f"{'round':>5}  {'floor s':>8}  {'first job s':>11}  {'job/floor':>9}  stages (s)")
    for r in range(opts.rounds):
        floors.append(floor_s(opts.device))
        wall, report = first_job(opts.device)
        jobs.append(wall)
        st = {k: round(v, 2) for k, v in (report.get("stages_s") or {}).items()}
        stages.append(st)
        print(f"{r + 1:>5}  {floors[-1]:>8.2f}  {wall:>11.2f}  {wall / floors[-1]:>9.2f}  {st}")
    f, j = statistics.median(floors), statistics.median(jobs)
    print(f"median  {f:>8.2f}  {j:>11.2f}  {j / f:>9.2f}  (over the floor: {j - f:.2f} s)")
    if opts.json:
        out = {"device": opts.device, "floor_s": floors, "first_job_s": jobs, "stages": stages}
        opts.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
