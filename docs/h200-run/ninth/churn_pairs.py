"""Churn (allocator churn, fixtures/workloads/host_timing.py): the clean worker against fresh
processes, interleaved, and a fresh process that times twice in a row (issue 24 item 5: the
clean worker read churn 6-12 % above fresh processes, 2026-12-04, with both unslowed).

    python3 docs/h200-run/ninth/churn_pairs.py [ROUNDS]

Each round: one profile through the launcher (its clean worker times the call again), then
one fresh process (tests/support/fresh_timing.py, the same count of calls). Then one process
that times three times in a row, with and without the worker's gc.freeze. One line each."""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, "tests")
sys.path.insert(0, "server")
from support.jobs import LauncherDriver, ok

SPEC = "fixtures/workloads/host_timing.py::churn"
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
DEV = os.environ.get("KS_DEVICE", "cuda")  # cpu: a dry run of this script
T0 = time.monotonic()


def said(what, d):
    s = d.get("slowed") or {}
    share = f"{s.get('share', 0):.0%} slowed" if s else "none slowed"
    print(
        f"{time.monotonic() - T0:6.1f}s {what:22s} {d['us_per_call']:8.1f} µs  "
        f"reps {d['reps']}  loop {d['reference_us']:.1f} µs  {share}  cpu {d.get('cpu', '-')}",
        flush=True,
    )


def fresh(reps, *extra):
    env = {**os.environ, "PYTHONPATH": "server"}
    out = subprocess.run(
        [sys.executable, "tests/support/fresh_timing.py", SPEC, DEV, str(reps), *extra],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


TWICE = r"""
import gc, json, os, sys
sys.path.insert(0, "tests/support"); sys.path.insert(0, "server")
import torch
if os.environ.get("FREEZE") == "1":
    gc.collect(); gc.freeze()
from fresh_timing import TimingJob, load_workload, last_cpu
from kernelscope.worker.program.timing import unprofiled_timing, warm_up
dev = torch.device(sys.argv[3])
fn, args = load_workload(sys.argv[1], sys.argv[3])
sync = (lambda: torch.cuda.synchronize()) if dev.type == "cuda" else (lambda: None)
call = lambda: fn(*args)
job = TimingJob(torch, int(sys.argv[2]))
per = warm_up(job, call, sync)
for i in range(3):
    t = unprofiled_timing(job, call, sync, dev, per)
    keep = {k: t[k] for k in ("us_per_call", "reps", "reference_us", "slowed")}
    print(json.dumps(keep | {"cpu": last_cpu()}), flush=True)
"""

driver = LauncherDriver(Path(tempfile.mkdtemp()))
try:
    for r in range(ROUNDS):
        t = ok(driver.run(SPEC, device=DEV, line_pass=False, timeout=300)).finished.sidecar.timing
        d = {
            "us_per_call": t.us_per_call,
            "reps": t.reps,
            "reference_us": t.reference_us,
            "slowed": None if t.slowed is None else {"share": t.slowed.share},
        }
        said(f"{t.process} r{r}", d)
        print(f"{'':8s}(profiling worker {t.profiling_worker_us_per_call or 0:.1f} µs)", flush=True)
        for f in fresh(t.reps):
            said(f"fresh r{r}", f)
        reps = t.reps
    for freeze in ("0", "1"):
        env = {**os.environ, "FREEZE": freeze}
        out = subprocess.run(
            [sys.executable, "-c", TWICE, SPEC, str(reps), DEV],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
        for i, f in enumerate(lines):
            said(f"one process #{i + 1} frz{freeze}", f)
        if out.returncode:
            print(out.stderr[-1500:])
finally:
    driver.close()
