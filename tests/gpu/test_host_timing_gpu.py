"""Host-bound unprofiled times agree with fresh processes (issue 24, item 5): on the H200 the
worker that never profiles read 29-54 % above fresh processes on these four patterns. Each is
timed in rounds of one job on the launcher's worker and one fresh process that warms up and
times as the worker does (tests/support/fresh_timing.py, the same count of calls), interleaved:
the host's speed drifts over a minute (checkpointed's fresh processes read 4.6 then 6.0 ms two
minutes apart, docs/h200-run/sixth/checkpointed_pairs.txt). The median of the rounds' own
ratios (each job over the fresh process timed after it) must be within 10 % of 1. That host
runs a thread's CPU ~1.7x slower in spells (docs/h200-run/fourth/clocks.txt); the worker and
the fresh processes alike leave the calls of such spells out, found by their blocks' own speed
(timing.Blocks), and each process's share of them is printed. Only rounds timed at the host's
speed on both sides are compared (``at_speed``): a spell can outlast a whole timing (on
2026-12-04 the same fresh process read graph_break 97 or 177 µs, churn 765 or 1294 µs), and
such a figure is the host's, not the worker's. Where the host left fewer than half of the
rounds (and at least two) at its speed the test skips, saying so. Checkpointed sits at the
host's noise: its fresh processes spread with a CV of 0.11-0.13 (0.20-0.23 pinned), the same
clean worker read it 5400 then 7605 µs in two jobs, and two figures against five then fell
outside 10 % in ~30-40 % of runs for an unbiased worker (docs/h200-run/eleventh/README.md:
1.064 and 0.885 in two runs back to back); it runs 20 rounds
(10 pinned), the others 5."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kernelscope.worker.program.timing import SLOWED

from support import REPO_ROOT
from support.fresh_timing import at_speed
from support.gpu import NEEDS_GPU
from support.jobs import LauncherDriver, ok

pytestmark = NEEDS_GPU
WORKLOAD = f"{REPO_ROOT}/fixtures/workloads/host_timing.py"
FRESH = REPO_ROOT / "tests" / "support" / "fresh_timing.py"


def fresh(spec: str, reps: int) -> dict[str, Any]:
    """One fresh process's figure over `reps` calls (fresh_timing.py's output)."""
    env = {**os.environ, "PYTHONPATH": f"{REPO_ROOT / 'server'}"}
    done = subprocess.run(
        [sys.executable, str(FRESH), spec, "cuda", str(reps)],
        capture_output=True, text=True, check=True, env=env,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def placed(threads: list[dict[str, Any]]) -> str:
    """Where a process's busy threads ran (UnprofiledTiming.threads as JSON): ``main@15
    pt_autograd_0@0``, those of at least 5 % of the busiest's CPU time."""
    busy = [t for t in threads if t["cpu_s"] >= 0.05 * threads[0]["cpu_s"]] if threads else []
    return " ".join(f"{'main' if t['timing'] else t['name']}@{t['cpu']}" for t in busy)


def slowed(s: dict[str, Any] | None) -> str:
    """A process's slowed calls (UnprofiledTiming.slowed as JSON), in a few words."""
    if s is None:
        return "none slowed"
    return f"{s['share']:.0%} slowed {s['factor']:.1f}x{'' if s['left_out'] else ', kept in'}"


#: Rounds of one worker job and one fresh process, interleaved. Checkpointed sits at the
#: host's noise (a CV of 0.11-0.13 a side): with 20 a side the median's ratio misses 10 % for
#: an unbiased worker in ~4 % of runs, against ~30-40 % with 2 against 5.
ROUNDS = {"churn": 5, "graph_break": 5, "checkpointed": 20, "loader_step": 5}
#: Seconds of calls the worker's timing takes at least, where set (RunProfile.timing_min_s):
#: to see how the figure holds with another floor than the clean worker's 0.5 s (it was
#: 2 s until this test held at 0.5 s on an H100, 2026-12-06).
MIN_S = os.environ.get("KERNELSCOPE_TEST_TIMING_MIN_S")
#: Other host-bound workloads to compare in 5 rounds, ``PATH::FUNC`` relative to the
#: repository, separated by commas: the library training steps of
#: fixtures/workloads/fifteenth.py (transformers, timm) read 0.906 and 0.945 of fresh
#: processes in one job each (docs/h200-run/sixteenth/README.md), too few to say.
NAMED = [s for s in os.environ.get("KERNELSCOPE_TEST_TIMING_SPECS", "").split(",") if s]
#: Rounds for each of NAMED (KERNELSCOPE_TEST_TIMING_ROUNDS, default 5): transformers' Llama
#: step spread 13.0-17.3 ms between rounds on each side on the H200 (2026-12-06), where 5
#: against 5 read 0.894.
NAMED_ROUNDS = int(os.environ.get("KERNELSCOPE_TEST_TIMING_ROUNDS") or 5)


@pytest.mark.timeout(900)  # checkpointed's 20 rounds took 349 s on the H200
@pytest.mark.parametrize("qualname", list(ROUNDS))
def test_unprofiled_time_is_within_ten_percent_of_fresh_processes(
    driver: LauncherDriver, qualname: str
) -> None:
    compare(driver, f"{WORKLOAD}::{qualname}", "", ROUNDS[qualname])


@pytest.mark.timeout(1800)
@pytest.mark.skipif(not NAMED, reason="KERNELSCOPE_TEST_TIMING_SPECS names no workload")
@pytest.mark.parametrize("spec", NAMED or [""])
def test_a_named_workload_is_within_ten_percent_of_fresh_processes(
    driver: LauncherDriver, spec: str
) -> None:
    """Each job profiles briefly (wait 0, warm-up 1, active 1, no memory pass): the timing
    that follows is what is compared."""
    compare(driver, f"{REPO_ROOT}/{spec}", "", NAMED_ROUNDS, wait=0, active=1, memory_pass=False)


@pytest.mark.timeout(600)
def test_checkpointed_on_one_vcpu_is_within_ten_percent_of_fresh_processes(
    tmp_path: Path,
) -> None:
    """Checkpointed's backward runs on autograd's own thread, and where the host puts that
    thread decides the step: 4.1 ms a step with both threads on one vCPU, 6.5 ms on two, in
    one pair of processes (docs/h200-run/tenth/checkpointed_threads.txt: the split threads
    spent 0.97 s of CPU in a 0.99 s window, the shared vCPU 0.62 in 0.62 — the same work
    costs more CPU apart), and fresh processes left free read 34 % apart. Here the placement
    is taken out: this thread, and so the workers and fresh processes it starts and all
    their threads, on one vCPU (not the first, which takes more of the interrupts), the
    comparison the worker's own."""
    cpu = max(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})  # this thread's: inherited by what it starts from here on
    pinned = LauncherDriver(tmp_path)
    try:
        compare(pinned, f"{WORKLOAD}::checkpointed", f" on vCPU {cpu}", 10)
    finally:
        pinned.close()
        os.sched_setaffinity(0, before)


def compare(driver: LauncherDriver, spec: str, where: str, rounds: int, **options: Any) -> None:
    """The worker's figure against fresh processes' in `rounds` rounds of one job on the
    same worker and one fresh process, interleaved so the host's drift over minutes falls
    on both sides alike: the median of each round's ratio (its job over its fresh process),
    of the rounds where both were timed at the host's speed, within 10 %. Not the ratio of
    the two sides' medians: where the host drifts over the rounds, the speed filter leaves
    out other rounds on each side (transformers' Llama step went from 16 to 23 ms over 12
    rounds on an H100, both sides alike: medians' ratio 1.114, paired 1.057;
    docs/h200-run/seventeenth/README.md). `options` go to the jobs (a shorter schedule)."""
    qualname = spec.rpartition("::")[2]

    def worker(**fields: Any) -> Any:
        if MIN_S:
            fields["timing_min_s"] = float(MIN_S)
        job = driver.run(
            spec, device="cuda", line_pass=False, timeout=300, fields=fields, **options
        )
        return ok(job).finished.sidecar.timing

    first = worker()
    jobs, runs = [first], [fresh(spec, first.reps)]
    for _ in range(rounds - 1):
        jobs.append(worker(timing_reps=first.reps))
        runs.append(fresh(spec, first.reps))
    workers = [msgspec.to_builtins(t) for t in jobs]
    best = min(r["reference_us"] for r in workers + runs)
    mine = [w["us_per_call"] for w in workers if at_speed(w, best, SLOWED)]
    theirs = [r["us_per_call"] for r in runs if at_speed(r, best, SLOWED)]
    pairs = [
        w["us_per_call"] / r["us_per_call"]
        for w, r in zip(workers, runs, strict=True)
        if at_speed(w, best, SLOWED) and at_speed(r, best, SLOWED)
    ]

    def said(r: dict[str, Any]) -> str:
        return (
            f"{r['us_per_call']:.1f} ({slowed(r['slowed'])}, loop {r['reference_us']:.1f} µs, "
            f"{placed(r['threads'])})"
        )

    spent = first.window_s[1] - first.window_s[0]
    counted = (
        f"at the host's speed {len(mine)} of {rounds} and {len(theirs)} of {rounds}, "
        f"both in {len(pairs)} rounds"
    )
    medians = statistics.median(mine) / statistics.median(theirs) if mine and theirs else 0
    ratio = statistics.median(pairs) if pairs else None
    print(f"{qualname}{where}: {first.reps} calls in {spent:.2f} s; worker ({first.process}) "
          f"{'; '.join(map(said, workers))} µs; fresh {'; '.join(map(said, runs))} µs; "
          f"{counted}; medians' ratio {medians:.3f}; ratio {ratio or 0:.3f}")  # fmt: skip
    assert first.reps >= 20 or first.reps * first.us_per_call >= 4.5e6
    if ratio is None or len(pairs) < max(2, rounds // 2):
        pytest.skip(f"{qualname}: the host ran slowed through most timings ({counted})")
    assert abs(ratio - 1) <= 0.10
