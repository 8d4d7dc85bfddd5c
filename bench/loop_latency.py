"""Edit-profile loop latency on a warm worker, stage by stage, against a cold script.

One `Launcher` is kept warm (as the editor's server keeps it) and runs `--jobs` profiles in a
row of each target in bench/workloads/loop_model.py: `model_step` (257 aten ops per call) and
`one_matmul` (one 256x256 `a @ b`). Per job: the wall time of `await launcher.profile(...)`,
its stages (the worker's `stages_s` joined with the launcher's, as report.py joins them), and
the user's own time: every call the job makes (cold call, the warm-up's calls as a loop
warms up, timing reps, the wait/warmup/active schedule, the line pass, and the clean
worker's warm-up and reps) at the unprofiled per-call time, plus the module import and the
input provider as timed by the worker (once: the clean worker's repeat of both is counted
as ours). Ours = wall - user's own. The analysis of the traces (report_for_job) is timed
apart, after the wall. A cold `python script.py` doing the same profiling (import torch,
build the inputs, one call, the same schedule under torch.profiler, export and gzip a
chrome trace) runs interleaved, per target. Job 1 warms the worker up: printed, left out
of the medians. Targets (issue 10): ours <= 0.3 s for ~250 ops and <= 0.15 s for one op,
on a warm worker.

    python bench/loop_latency.py [--jobs N] [--device cpu|cuda] [--targets model,matmul]
                                 [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from kernelscope.engine.launcher import Launcher
from kernelscope.engine.runner import JobResult
from kernelscope.engine.targets import Schedule, build_request, load_target
from kernelscope.protocol import WorkerReady
from kernelscope.report.build import report_for_job

REPO = Path(__file__).resolve().parent.parent
WORKLOAD = REPO / "bench" / "workloads" / "loop_model.py"
SCHEDULE = Schedule(wait=1, warmup=3, active=5)
#: A job's wall time outside every stage: the worker's bookkeeping after a job (its
#: gc.collect(), output capture) and the frames' round trip.
UNSTAGED = "(not in a stage)"


@dataclass(frozen=True)
class Spec:
    """A benchmark target: its function in loop_model.py and its goal for ours."""

    key: str
    qualname: str
    goal_s: float
    what: str
    path: Path = WORKLOAD


SPECS = {
    "model": Spec("model", "model_step", 0.3, "~250 ops"),
    "matmul": Spec("matmul", "one_matmul", 0.15, "one op"),
    # not tuned for: the real-workload fixture (torchvision ResNet-50, bf16, batch 128; GPU)
    "resnet": Spec(
        "resnet", "resnet_forward", 0.3, "ResNet-50", REPO / "fixtures" / "workloads" / "cnn.py"
    ),
}


@dataclass
class WarmJob:
    """One profile on the warm worker; seconds throughout."""

    target: str
    index: int
    wall_s: float
    analysis_s: float
    stages_s: dict[str, float]
    calls: dict[str, int]
    per_call_s: float
    timing_process: str
    profiling_worker_per_call_s: float | None
    user_s: float = 0.0
    ours_s: float = 0.0
    ours_by_stage_s: dict[str, float] = field(default_factory=dict[str, float])


@dataclass
class ColdRun:
    """One cold `python script.py`; seconds, its phases as the script timed them."""

    target: str
    index: int
    wall_s: float
    torch_import_s: float
    import_s: float
    inputs_s: float
    calls: int
    user_s: float = 0.0
    ours_s: float = 0.0


def joined_stages(result: JobResult) -> dict[str, float]:
    """The worker's and the launcher's stages in the order they ran (as report_for_job)."""
    launcher = result.stages_s
    return {
        **({"worker start": launcher["worker start"]} if "worker start" in launcher else {}),
        **result.finished.sidecar.stages_s,
        **{k: v for k, v in launcher.items() if k != "worker start"},
    }


def user_calls(result: JobResult) -> dict[str, int]:
    """The function's calls per stage of one job, as program.py and the launcher make them."""
    side = result.finished.sidecar
    timing = side.timing
    # the cold call, then the warm-up as a loop warms up (issue 24), in the same stage
    calls = {"cold": 1 + side.cold.warmup_calls, "schedule": side.wait + side.warmup + side.active}
    if timing.process == "clean worker":
        # The clean worker: its warm-up and its reps (the sidecar's timing now).
        calls["clean timing"] = timing.warmup_calls + timing.reps
        # The profiling worker's reps are not returned. Its timing stage is nothing but the
        # probe and 5..100 reps, so their count is the stage over that worker's median call.
        assert timing.profiling_worker_us_per_call is not None
        stage_us = side.stages_s["timing"] * 1e6
        calls["timing"] = min(101, max(6, round(stage_us / timing.profiling_worker_us_per_call)))
    else:
        calls["timing"] = 1 + timing.reps
    if "lines" in side.stages_s:
        calls["lines"] = max(1, min(side.active, 3))
    return calls


def account(job: WarmJob) -> None:
    """Fill in the user's own time, ours, and ours per stage."""
    own = {stage: n * job.per_call_s for stage, n in job.calls.items()}
    own["import"] = job.stages_s["import"]
    own["inputs"] = job.stages_s["inputs"]
    job.user_s = sum(own.values())
    job.ours_s = job.wall_s - job.user_s
    job.ours_by_stage_s = {s: t - own.get(s, 0.0) for s, t in job.stages_s.items()}
    job.ours_by_stage_s[UNSTAGED] = job.wall_s - sum(job.stages_s.values())


async def warm_job(
    launcher: Launcher,
    ready: WorkerReady,
    spec: Spec,
    index: int,
    device: str,
    trace_dir: Path,
    timing_min_s: float | None = None,
) -> WarmJob:
    target = load_target(f"{spec.path}::{spec.qualname}")
    request = build_request(target, trace_dir / f"{spec.key}-{index}", SCHEDULE, device=device)
    request = msgspec.structs.replace(request, timing_min_s=timing_min_s)
    t0 = time.perf_counter()
    result = await launcher.profile(request)
    wall = time.perf_counter() - t0
    t1 = time.perf_counter()
    report_for_job(result.finished, str(spec.path), spec.qualname, ready, stages_s=result.stages_s)
    analysis = time.perf_counter() - t1
    timing = result.finished.sidecar.timing
    pw = timing.profiling_worker_us_per_call
    job = WarmJob(
        target=spec.key,
        index=index,
        wall_s=wall,
        analysis_s=analysis,
        stages_s=joined_stages(result),
        calls=user_calls(result),
        per_call_s=timing.us_per_call / 1e6,
        timing_process=timing.process,
        profiling_worker_per_call_s=pw / 1e6 if pw is not None else None,
    )
    account(job)
    return job


COLD_SCRIPT = """\
import gzip, json, os, shutil, sys, tempfile, time

t0 = time.perf_counter()
import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

t1 = time.perf_counter()
sys.path.insert(0, {workloads!r})
import {module} as workload

fn = workload.{qualname}
t2 = time.perf_counter()
args = workload.{qualname}_inputs(device={device!r})
t3 = time.perf_counter()
cuda = torch.device({device!r}).type == "cuda"
fn(*args)  # cold call
out = tempfile.mkdtemp()
trace = os.path.join(out, "t.json")
with profile(
    activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else []),
    schedule=schedule(wait={wait}, warmup={warmup}, active={active}),
    record_shapes=True,
    with_stack=True,
    with_flops=True,
    on_trace_ready=lambda p: p.export_chrome_trace(trace),
) as prof:
    for i in range({steps}):
        with record_function("call"):
            fn(*args)
        if cuda and i == {steps} - 1:
            torch.cuda.synchronize()
        prof.step()
prof.key_averages()
with open(trace, "rb") as src, gzip.open(trace + ".gz", "wb") as dst:
    shutil.copyfileobj(src, dst)
shutil.rmtree(out)
print(json.dumps(dict(torch_import_s=t1 - t0, import_s=t2 - t1, inputs_s=t3 - t2)))
"""


def write_cold_script(folder: Path, spec: Spec, device: str) -> Path:
    steps = SCHEDULE.wait + SCHEDULE.warmup + SCHEDULE.active
    text = COLD_SCRIPT.format(
        workloads=str(spec.path.parent),
        module=spec.path.stem,
        qualname=spec.qualname,
        device=device,
        wait=SCHEDULE.wait,
        warmup=SCHEDULE.warmup,
        active=SCHEDULE.active,
        steps=steps,
    )
    path = folder / f"cold_{spec.qualname}.py"
    path.write_text(text, encoding="utf-8")
    return path


def cold_run(script: Path, spec: Spec, index: int) -> ColdRun:
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(script)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "KINETO_LOG_LEVEL": "99"},
    )
    wall = time.perf_counter() - t0
    phases = json.loads(done.stdout.strip().splitlines()[-1])
    return ColdRun(
        target=spec.key,
        index=index,
        wall_s=wall,
        torch_import_s=phases["torch_import_s"],
        import_s=phases["import_s"],
        inputs_s=phases["inputs_s"],
        calls=1 + SCHEDULE.wait + SCHEDULE.warmup + SCHEDULE.active,
    )


async def run_rounds(
    specs: list[Spec],
    jobs: int,
    want_device: str | None,
    tmp: Path,
    timing_min_s: float | None = None,
) -> tuple[WorkerReady, str, list[WarmJob], list[ColdRun]]:
    """Round i: job i of every target on the warm worker, then a cold run of each
    (`timing_min_s`: the jobs' RunProfile.timing_min_s)."""
    launcher = Launcher(python=sys.executable)
    warm: list[WarmJob] = []
    cold: list[ColdRun] = []
    try:
        ready = await launcher.start()  # the editor's server keeps this worker warm
        device = want_device or ("cuda" if ready.devices else "cpu")
        scripts = {s.key: write_cold_script(tmp, s, device) for s in specs}
        print_header(ready, device, specs, jobs)
        for i in range(jobs):
            for spec in specs:
                job = await warm_job(launcher, ready, spec, i, device, tmp / "traces", timing_min_s)
                warm.append(job)
                print_job(job)
            for spec in specs:
                run = cold_run(scripts[spec.key], spec, i)
                cold.append(run)
                print(
                    f"  cold {spec.key:6} run {i + 1}: wall {run.wall_s:.3f} s "
                    f"(import torch {run.torch_import_s:.3f} s)"
                )
    finally:
        await launcher.close()
    return ready, device, warm, cold


def cpu_name() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def print_header(ready: WorkerReady, device: str, specs: list[Spec], jobs: int) -> None:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    cpus = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cpus
    gpus = "; ".join(f"cuda:{d.index} {d.name}" for d in ready.devices) or "none"
    print(
        f"python {ready.python} · torch {ready.torch} (CUDA {ready.cuda}) · "
        f"{cpus} CPUs ({usable} usable) · load average {load}"
    )
    print(f"CPU: {cpu_name()} · GPUs: {gpus} · device for the jobs: {device}")
    names = ", ".join(f"{s.qualname} ({s.what})" for s in specs)
    print(
        f"targets: {names}; schedule {SCHEDULE.wait}/{SCHEDULE.warmup}/{SCHEDULE.active}, "
        f"{jobs} jobs each, job 1 left out of the medians"
    )


def print_job(job: WarmJob) -> None:
    note = " (worker warm-up, not in the medians)" if job.index == 0 else ""
    calls = sum(job.calls.values())
    print(
        f"  warm {job.target:6} job {job.index + 1}: wall {job.wall_s:.3f} s, user "
        f"{job.user_s:.3f} s ({calls} calls x {job.per_call_s * 1e3:.3f} ms + import/inputs), "
        f"ours {job.ours_s:.3f} s, analysis {job.analysis_s:.3f} s{note}"
    )
    print("    " + " · ".join(f"{k} {v:.3f}" for k, v in job.stages_s.items()))


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarize(
    specs: list[Spec], warm: list[WarmJob], cold: list[ColdRun]
) -> dict[str, dict[str, Any]]:
    """Medians per target over jobs 2..N; cold runs' user time from the warm per-call time."""
    summary: dict[str, dict[str, Any]] = {}
    for spec in specs:
        jobs = [j for j in warm if j.target == spec.key and j.index > 0]
        runs = [r for r in cold if r.target == spec.key and r.index > 0]
        per_call = med([j.per_call_s for j in jobs])
        for r in (r for r in cold if r.target == spec.key):
            r.user_s = r.calls * per_call + r.import_s + r.inputs_s
            r.ours_s = r.wall_s - r.user_s
        stages: list[str] = []
        for j in jobs:
            stages += [s for s in [*j.stages_s, *j.ours_by_stage_s] if s not in stages]
        ours = med([j.ours_s for j in jobs])
        cold_ours = med([r.ours_s for r in runs])
        summary[spec.key] = {
            "stages_s": {
                s: med(
                    [
                        {**j.stages_s, UNSTAGED: j.ours_by_stage_s[UNSTAGED]}.get(s, 0.0)
                        for j in jobs
                    ]
                )
                for s in stages
            },
            "ours_by_stage_s": {
                s: med([j.ours_by_stage_s.get(s, 0.0) for j in jobs]) for s in stages
            },
            "wall_s": med([j.wall_s for j in jobs]),
            "user_s": med([j.user_s for j in jobs]),
            "ours_s": ours,
            "analysis_s": med([j.analysis_s for j in jobs]),
            "ours_plus_analysis_s": med([j.ours_s + j.analysis_s for j in jobs]),
            "per_call_s": per_call,
            "calls": med([float(sum(j.calls.values())) for j in jobs]),
            "goal_s": spec.goal_s,
            "met": ours <= spec.goal_s,
            "cold_wall_s": med([r.wall_s for r in runs]),
            "cold_user_s": med([r.user_s for r in runs]),
            "cold_ours_s": cold_ours,
            "cold_over_ours": cold_ours / ours,
        }
    return summary


def print_table(specs: list[Spec], summary: dict[str, dict[str, Any]]) -> None:
    keys = [s.key for s in specs]
    width = 22
    head = "".join(f"{s.qualname + ' stage':>{width}}{'ours':>9}" for s in specs)
    print(f"\nmedians, seconds{'':4}{head}")
    stages: list[str] = []
    for k in keys:
        stages += [s for s in summary[k]["stages_s"] if s not in stages]
    for stage in stages:
        cells = "".join(
            f"{summary[k]['stages_s'].get(stage, 0.0):>{width}.3f}"
            f"{summary[k]['ours_by_stage_s'].get(stage, 0.0):>9.3f}"
            for k in keys
        )
        print(f"  {stage:18}{cells}")
    rows = [
        ("wall", "wall_s"),
        ("user's own", "user_s"),
        ("ours", "ours_s"),
        ("analysis (apart)", "analysis_s"),
        ("ours + analysis", "ours_plus_analysis_s"),
        ("cold script wall", "cold_wall_s"),
        ("cold script ours", "cold_ours_s"),
    ]
    for label, key in rows:
        cells = "".join(f"{summary[k][key]:>{width}.3f}{'':9}" for k in keys)
        print(f"  {label:18}{cells}")
    for spec in specs:
        s = summary[spec.key]
        verdict = "met" if s["met"] else "MISSED"
        print(
            f"{spec.qualname}: ours {s['ours_s']:.3f} s <= {spec.goal_s:.2f} s: {verdict}; "
            f"cold script ours {s['cold_ours_s']:.3f} s = {s['cold_over_ours']:.1f}x ours "
            f"({s['calls']:.0f} calls of {s['per_call_s'] * 1e3:.3f} ms per job)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__ and __doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=6, help="profiles per target (first: warm-up)")
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda if any)")
    parser.add_argument(
        "--targets", default="model,matmul", help="comma-separated: model,matmul,resnet (GPU)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the raw numbers here")
    parser.add_argument(
        "--timing-min-s",
        type=float,
        default=None,
        help="seconds of calls each unprofiled timing takes at least (default: the workers', "
        "0.5 s in both): the loop's cost against it",
    )
    args = parser.parse_args()
    keys = [k.strip() for k in args.targets.split(",") if k.strip()]
    unknown = [k for k in keys if k not in SPECS]
    if unknown or not keys:
        parser.error(f"--targets: choose from {', '.join(SPECS)}; got {args.targets!r}")
    if args.jobs < 2:
        parser.error("--jobs must be >= 2 (the first is left out of the medians)")
    specs = [SPECS[k] for k in keys]
    with tempfile.TemporaryDirectory() as tmp:
        ready, device, warm, cold = asyncio.run(
            run_rounds(specs, args.jobs, args.device, Path(tmp), args.timing_min_s)
        )
    summary = summarize(specs, warm, cold)
    print_table(specs, summary)
    if args.json is not None:
        raw = {
            "python": ready.python,
            "torch": ready.torch,
            "cuda": ready.cuda,
            "cpus": os.cpu_count(),
            "load_average_end": os.getloadavg(),
            "cpu": cpu_name(),
            "gpus": [d.name for d in ready.devices],
            "device": device,
            "schedule": asdict(SCHEDULE),
            "warm_jobs": [asdict(j) for j in warm],
            "cold_runs": [asdict(r) for r in cold],
            "summary": summary,
        }
        args.json.write_text(json.dumps(raw, indent=1), encoding="utf-8")
        print(f"raw numbers: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
