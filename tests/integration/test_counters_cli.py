"""`--counters` where this machine cannot measure: a CPU run and no Nsight Compute each give
one clear line, the profile itself still printed; the project setting turns it on."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest
from integration.test_cli import kernelscope

from kernelscope.analysis.counters import KernelPick
from kernelscope.app.counters import NEEDS_CUDA, measure_counters
from kernelscope.engine.counters import (
    NO_COUNTER_ACCESS,
    NO_NCU,
    NOT_NCCL,
    CountersUnavailable,
    ncu_argv,
    ncu_failure,
    run_under_ncu,
    split_metrics,
)
from kernelscope.engine.runner import JobFailed, JobResult
from kernelscope.protocol import (
    NCU_METRICS,
    Counters,
    KernelCounters,
    ProfileFinished,
    RunProfile,
    Sidecar,
    WorkerReady,
)

from support import FIXTURES, REPO_ROOT, WORKLOADS

THREE_LINES = f"{WORKLOADS}/three_lines.py::three_lines"
ARGS = ("--wait", "0", "--warmup", "1", "--active", "2", "--no-lines")


def cpu_profile(*extra: str, cwd: Path = REPO_ROOT, target: str = THREE_LINES):
    return kernelscope("profile", target, "--device", "cpu", *ARGS, *extra, cwd=cwd)


def test_a_cpu_run_says_counters_need_a_cuda_gpu() -> None:
    proc = kernelscope(
        "profile",
        f"{WORKLOADS}/three_lines.py::three_lines",
        "--device",
        "cpu",
        "--counters",
        *ARGS,
    )
    assert proc.returncode == 1, proc.stderr
    assert "roofline" in proc.stdout or "ops (totals" in proc.stdout  # the profile stands
    assert f"counters    not measured: {NEEDS_CUDA}" in proc.stdout
    assert (
        proc.stderr.strip().splitlines()[-1] == f"kernelscope: counters not measured: {NEEDS_CUDA}"
    )
    assert "Traceback" not in proc.stderr


def test_the_json_report_carries_why_there_are_no_counters() -> None:
    proc = cpu_profile("--counters", "--json")
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["counters"]["error"] == NEEDS_CUDA
    assert report["counters"]["kernels"] == []


def test_without_the_flag_there_is_no_counters_entry() -> None:
    proc = cpu_profile("--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["counters"] is None


def test_the_project_setting_turns_counters_on(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.kernelscope]\ncounters = true\n")
    (tmp_path / "work.py").write_text((WORKLOADS / "three_lines.py").read_text())
    proc = cpu_profile(cwd=tmp_path, target="work.py::three_lines")
    assert proc.returncode == 1
    assert NEEDS_CUDA in proc.stdout


def test_a_bad_project_setting_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.kernelscope]\ncounters = "yes"\n')
    (tmp_path / "work.py").write_text((WORKLOADS / "three_lines.py").read_text())
    proc = cpu_profile(cwd=tmp_path, target="work.py::three_lines")
    assert proc.returncode == 2
    assert "counters must be true or false" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_project_chooses_the_kernels_and_the_flags_win(tmp_path: Path) -> None:
    """counters_limit and counters_match under [tool.kernelscope] are the defaults of
    --counters-limit and --counters-match; --counters-match alone turns counters on; a pattern
    or a limit that cannot be used is one line naming the setting, before anything runs."""
    from kernelscope.engine.kernel_choice import KernelChoice
    from kernelscope.engine.project import ProjectError, load_project

    (tmp_path / "work.py").write_text((WORKLOADS / "three_lines.py").read_text())
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.kernelscope]\ncounters_limit = 200\ncounters_match = "Adam"\n')
    assert load_project(tmp_path / "work.py").counter_kernels == KernelChoice(200, "Adam")
    for bad, said in [
        ("counters_limit = 0", "counters_limit must be an integer >= 1, got 0"),
        ('counters_match = "(adam"', "counters_match '(adam' is not a regular expression"),
        ("counters_match = 3", "counters_match must be a regular expression, got 3"),
    ]:
        config.write_text(f"[tool.kernelscope]\n{bad}\n")
        with pytest.raises(ProjectError, match=re.escape(said)):
            load_project(tmp_path / "work.py")
        proc = cpu_profile(cwd=tmp_path, target="work.py::three_lines")
        assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr
    config.write_text("[tool.kernelscope]\n")
    proc = cpu_profile("--counters-match", "[", cwd=tmp_path, target="work.py::three_lines")
    assert proc.returncode == 2
    assert "--counters-match '[' is not a regular expression" in proc.stderr
    proc = cpu_profile("--counters-limit", "0", cwd=tmp_path, target="work.py::three_lines")
    assert proc.returncode == 2 and "--counters-limit" in proc.stderr
    proc = cpu_profile("--counters-match", "gemm", cwd=tmp_path, target="work.py::three_lines")
    assert proc.returncode == 1 and f"counters    not measured: {NEEDS_CUDA}" in proc.stdout


def test_a_pattern_that_matches_no_kernel_says_so_and_runs_no_ncu(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """GPT-2's prefill: `Kernel2` names its cuBLAS GEMMs' function, so the functions asked of
    ncu are those alone, whatever their time; a pattern matching none of the call's kernels is
    the one line that says so, ncu never started."""
    import kernelscope.app.counters as app_counters
    from kernelscope.app.counters import matched_none, too_many
    from kernelscope.engine.counters import NcuRun
    from kernelscope.render.text import counters_lines

    asked: list[list[str]] = []
    csv = (FIXTURES / "counters_probe" / "ncu_raw_cache_all.csv").read_text()

    async def run(*args: Any, functions: Sequence[str] = (), **kwargs: Any) -> NcuRun:
        asked.append(list(functions))
        return NcuRun(csv, 12.0, 64, [])

    monkeypatch.setattr(app_counters, "run_under_ncu", run)
    result = _copied_prefill(tmp_path)
    counters = asyncio.run(measure_counters(_request(), result, match="Kernel2"))
    assert asked == [["Kernel2"]] and counters.functions == ["Kernel2"]
    assert counters.match == "Kernel2" and not counters.error
    line = counters_lines(counters, 219.0)[1]
    assert "those of its functions matching 'Kernel2' (Kernel2: 1," in line
    counters = asyncio.run(measure_counters(_request(), result, match="no_such_kernel"))
    assert counters.error == matched_none("no_such_kernel") and len(asked) == 1
    assert counters_lines(counters)[1].endswith(matched_none("no_such_kernel"))
    # a function that launches more kernels than the limit is named, with its launches
    counters = asyncio.run(
        measure_counters(_request(), result, launch_count=2, match="Kernel2|gather")
    )  # Kernel2 once, then vectorized_gather_kernel's 2 launches do not fit
    assert len(asked) == 2 and asked[1] == ["Kernel2"]
    assert counters.left_out == {"vectorized_gather_kernel": 2}
    line = counters_lines(counters, 219)[1]
    assert "matched but not measured, their launches more than fit: vectorized_gather_" in line
    counters = asyncio.run(measure_counters(_request(), result, launch_count=1, match="gather"))
    assert counters.error == too_many("gather", 1, {"vectorized_gather_kernel": 2})
    assert len(asked) == 2 and "raise --counters-limit" in counters.error


def test_counters_with_ranks_is_a_usage_error() -> None:
    proc = cpu_profile("--counters", "--nproc", "2")
    assert proc.returncode == 2
    assert "--counters measures one process" in proc.stderr


def _gpu_result() -> JobResult:
    """A finished GPU job as the profile returns it (the recorded H200 sidecar)."""
    side = msgspec.json.decode(
        (FIXTURES / "matmul_add_8192" / "sidecar.json").read_bytes(), type=Sidecar
    )
    assert side.device_type == "cuda"
    ready = WorkerReady(
        pid=1, hostname="h", python="3.12", executable=sys.executable, torch="2.11", cuda="13.0"
    )
    return JobResult(ProfileFinished(job_id="j", trace_path="t", sidecar=side), ready)


def _request() -> RunProfile:
    return RunProfile(
        job_id="j",
        path=str(WORKLOADS / "three_lines.py"),
        qualname="three_lines",
        module_name="three_lines",
        project_root=str(WORKLOADS),
        trace_dir="/tmp",
    )


def test_no_ncu_on_path_is_one_line_saying_where_to_get_it(tmp_path: Path) -> None:
    counters = asyncio.run(measure_counters(_request(), _gpu_result(), ncu_path=str(tmp_path)))
    assert counters.error == NO_NCU
    assert "ncu" in NO_NCU and "https://developer.nvidia.com/nsight-compute" in NO_NCU
    assert counters.kernels == []


def test_the_launcher_refuses_before_starting_anything_without_ncu(tmp_path: Path) -> None:
    with pytest.raises(CountersUnavailable, match="needs Nsight Compute"):
        asyncio.run(run_under_ncu(_request(), sys.executable, ncu_path=str(tmp_path)))


def test_no_counter_access_is_named_with_its_fix() -> None:
    log = (
        "==PROF== Connected to process 1\n==ERROR== ERR_NVGPUCTRPERM - The user does not have "
        "permission to access NVIDIA GPU Performance Counters on the target device 0.\n"
    )
    assert ncu_failure(log) == NO_COUNTER_ACCESS
    assert "NVreg_RestrictProfilingToAdminUsers=0" in NO_COUNTER_ACCESS
    with pytest.raises(CountersUnavailable, match="ERR_NVGPUCTRPERM"):
        split_metrics("Device NVIDIA H100 (GH100)\n==ERROR== ERR_NVGPUCTRPERM - no permission\n")
    assert ncu_failure("==ERROR== Failed to connect to process\n") == (
        "Nsight Compute: Failed to connect to process"
    )
    assert ncu_failure((FIXTURES / "counters_probe" / "ncu_raw_cache_all.csv").read_text()) is None


def test_metrics_the_gpu_lacks_are_left_out_of_the_run() -> None:
    listed = [m.split(".")[0] for m in NCU_METRICS if "fp64" not in m]
    query = "Device NVIDIA H200 (GH100)\n" + "\n".join(f"{m}  Counter  # of x" for m in listed)
    have, missing = split_metrics(query)
    assert missing == [m for m in NCU_METRICS if "fp64" in m]
    assert have and all("fp64" not in m for m in have)


def test_the_ncu_command_line_ranges_one_call_and_keeps_its_lines_out_of_the_frames() -> None:
    argv = ncu_argv("/usr/bin/ncu", "/usr/bin/python3", "/tmp/x.csv", ["dram__bytes_read.sum"], 64)
    text = " ".join(argv[:-1])
    for option in (
        "--profile-from-start off",
        "--clock-control none",
        "--cache-control all",
        "--log-file /tmp/x.csv",
        "--launch-count 64",
        f"--kernel-name {NOT_NCCL}",
        "--csv --page raw",
    ):
        assert option in text
    assert argv[-4:-1] == ["/usr/bin/python3", "-u", "-c"]


NCU_STANDIN = REPO_ROOT / "tests" / "standins" / "ncu"


def test_the_worker_under_ncu_runs_the_ranged_job_over_stdin(monkeypatch) -> None:
    # The stand-in runs the worker as ncu does (stdin passed through, its lines in the log):
    # the bootstrap, the frames and the RunCounters job all work; on the CPU the job says why
    # it cannot range a call.
    have = [m.split(".")[0] for m in NCU_METRICS if "fp64" not in m]
    monkeypatch.setenv("KS_NCU_STANDIN_METRICS", ",".join(have))
    request = msgspec.structs.replace(_request(), device="cpu")
    with pytest.raises(JobFailed) as failed:
        asyncio.run(run_under_ncu(request, sys.executable, 120.0, ncu_path=str(NCU_STANDIN)))
    assert failed.value.failure.kind == "no_cuda"
    assert "hardware counters need a CUDA GPU" in failed.value.failure.message


def test_analyze_shows_a_sidecars_counters_as_measured_rows(tmp_path: Path) -> None:
    # A profile's sidecar keeps what --counters measured: analyzing the trace again gives the
    # same measured rows (the H200 8192 GEMM's trace, with the probe's counters of that call)
    from kernelscope.analysis.counters import parse_ncu_csv

    folder = FIXTURES / "matmul_add_8192"
    kernels = parse_ncu_csv((FIXTURES / "counters_probe" / "ncu_raw_cache_all.csv").read_text())
    side = msgspec.json.decode((folder / "sidecar.json").read_bytes(), type=Sidecar)
    counters = Counters(
        kernels=[k for k in kernels if k.nvtx == "mm"], seconds=21.5, launch_count=64
    )
    side = msgspec.structs.replace(side, counters=counters)
    (tmp_path / "sidecar.json").write_bytes(msgspec.json.encode(side))
    (tmp_path / "trace.json.gz").write_bytes((folder / "trace.json.gz").read_bytes())
    proc = kernelscope("analyze", str(tmp_path / "trace.json.gz"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    header = next(ln for ln in lines if ln.lstrip().startswith("figures"))
    assert "op" in header and "bound" in header
    mm = next(ln for ln in lines if "aten::mm" in ln and "measured" in ln)
    assert "compute" in mm
    assert any("Nsight Compute measured 2 kernels of one warm call in 21.5 s" in ln for ln in lines)
    proc = kernelscope("analyze", str(tmp_path / "trace.json.gz"), "--json")
    rows = {r["name"]: r for r in json.loads(proc.stdout)["roofline"]}
    assert rows["aten::mm"]["measured"] and rows["aten::mm"]["flops_per_step"] == 1_116_691_496_960


def test_the_kernel_filter_leaves_out_nccl_kernels_only() -> None:
    import re

    pattern = re.compile(NOT_NCCL.removeprefix("regex:"))
    for name in ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ncclKernel_SendRecv", "nccl"):
        assert not pattern.fullmatch(name) and not pattern.search(name), name
    for name in ("nvjet_sm90_tst_320x128", "vectorized_elementwise_kernel", "n", "ncc", "nc_x"):
        assert pattern.fullmatch(name) and pattern.search(name), name


def test_a_call_of_more_kernels_than_the_launch_count_measures_its_costliest_functions() -> None:
    """GPT-2's prefill (219 kernels a call, H200 fixture): its first 64 kernels hold 12 % of
    its GPU time; the functions chosen by their summed kernel time (each whose launches all
    fit in 64, so its rows are measured whole) hold 73 %. ncu selects them by a regex that
    matches a function's name with or without its namespace, whether it searches or matches
    the whole name."""
    import re

    from kernelscope.analysis.counters import base_name, costliest_functions, one_call_kernels
    from kernelscope.analysis.timeline import build_timeline
    from kernelscope.analysis.trace_load import load_trace
    from kernelscope.engine.counters import kernel_filter

    trace = load_trace(FIXTURES / "gpt2_prefill" / "trace.json.gz")
    timeline = build_timeline(trace)
    kernels = one_call_kernels(timeline.events, timeline.steps)
    chosen = costliest_functions(trace, timeline.events, timeline.steps, 64).functions
    picked = [g for g in kernels if base_name(g.name) in chosen]
    total = sum(g.dur for g in kernels)
    assert len(kernels) == 219 and len(picked) <= 64
    assert sum(g.dur for g in picked) / total > 0.7 > 0.2 > sum(g.dur for g in kernels[:64]) / total
    assert "vectorized_gather_kernel" in chosen and "Kernel2" in chosen
    small_trace = load_trace(FIXTURES / "matmul_add_8192" / "trace.json.gz")
    small = build_timeline(small_trace)
    assert costliest_functions(small_trace, small.events, small.steps, 64) == (
        [],
        {},
        "",
    )  # all fit

    pattern = re.compile(kernel_filter(chosen).removeprefix("regex:"))
    for name in ("Kernel2", "cutlass::Kernel2", "at::native::vectorized_gather_kernel"):
        assert pattern.fullmatch(name) and pattern.search(name), name
    for name in ("vectorized_elementwise_kernel", "Kernel22", "ncclDevKernel_AllReduce"):
        assert not pattern.fullmatch(name) and not pattern.search(name), name
    assert kernel_filter([]) == NOT_NCCL
    argv = ncu_argv("/usr/bin/ncu", "/usr/bin/python3", "/tmp/x.csv", ["m"], 64, chosen)
    assert argv[argv.index("--kernel-name") + 1] == kernel_filter(chosen)


@pytest.mark.parametrize(
    ("fixture", "before", "now"),
    [("convnextv2_adamw/raw.json.gz", 0.04, 0.40), ("vit_train/trace.json.gz", 0.09, 0.20)],
)
def test_the_functions_chosen_make_whole_rows(fixture: str, before: float, now: float) -> None:
    """The costliest functions alone left most rows part-measured: ConvNeXt-V2's convolution
    backwards each run a dgrad and a wgrad kernel, and its 64 kernels of the costliest
    functions made 7 rows whole, 3 % of its GPU time (H100, session_a.sh). Taking the
    costliest rows' functions together, each row whole where all their launches fit, makes
    43 %; ViT's training step 21 % where it was 8 %."""
    from kernelscope.analysis.costs import OpCosts
    from kernelscope.analysis.counters import (
        base_name,
        costliest_functions,
        kernel_rows,
        one_call_kernels,
    )
    from kernelscope.analysis.timeline import build_timeline
    from kernelscope.analysis.trace_load import load_trace

    trace = load_trace(FIXTURES / fixture)
    timeline = build_timeline(trace)
    kernels = one_call_kernels(timeline.events, timeline.steps)
    rows = kernel_rows(trace, kernels, OpCosts())
    total = sum(g.dur for g in kernels)

    def whole_rows_share(chosen: set[str]) -> float:
        part = {k for g, k in zip(kernels, rows, strict=True) if base_name(g.name) not in chosen}
        return sum(g.dur for g, k in zip(kernels, rows, strict=True) if k not in part) / total

    chosen = set(costliest_functions(trace, timeline.events, timeline.steps, 64).functions)
    picked = [g for g in kernels if base_name(g.name) in chosen]
    assert len(kernels) > 64 >= len(picked)
    assert whole_rows_share(chosen) > now
    by_time: dict[str, float] = {}  # the choice by function alone, as before
    for g in kernels:
        by_time[base_name(g.name)] = by_time.get(base_name(g.name), 0.0) + g.dur
    launches = {n: sum(base_name(g.name) == n for g in kernels) for n in by_time}
    alone: set[str] = set()
    room = 64
    for name in sorted(by_time, key=lambda n: -by_time[n]):
        if launches[name] <= room:
            alone.add(name)
            room -= launches[name]
    assert whole_rows_share(alone) < before


def test_a_patterns_launches_are_a_calls_where_the_steps_kernels_differ() -> None:
    """Two steps of 5 kernels in all (a lazy init in the first): one call's kernels are not
    known, so each function's launches are the steps' divided among them (2 a call, not 4),
    and a limit of 3 takes the optimizer's function."""
    from typing import Any, cast

    from kernelscope.analysis.counters import costliest_functions
    from kernelscope.analysis.trace_model import GpuEvent

    names = ["void init_k()", *["void at::native::multi_tensor_apply_kernel<T>()"] * 2] + [
        "void at::native::multi_tensor_apply_kernel<T>()"
    ] * 2
    events = [GpuEvent("kernel", n, float(i), 1.0, 0, 7, i, i, 0, b"") for i, n in enumerate(names)]
    pick = costliest_functions(cast(Any, None), events, 2, 3, "multi_tensor")
    assert pick == (["multi_tensor_apply_kernel"], {}, "")


def test_measured_kernels_of_some_functions_pair_with_their_own_in_order() -> None:
    from kernelscope.analysis.counters import pair_kernels
    from kernelscope.analysis.trace_model import GpuEvent

    def kernel(name: str, at: int) -> GpuEvent:
        return GpuEvent("kernel", name, float(at), 1.0, 0, 7, at, at, 0, b"")

    traced = [kernel(n, i) for i, n in enumerate(["void add_k<float>()", "void gemv_k()"] * 3)]
    measured = [KernelCounters(name="gemv_k", duration_us=float(i)) for i in range(3)]
    pairs = pair_kernels(traced, measured)
    assert [(g.ts, m.duration_us) for g, m in pairs] == [(1.0, 0.0), (3.0, 1.0), (5.0, 2.0)]


def test_names_ncu_matched_none_of_fall_back_to_the_calls_first_kernels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GPT-2's prefill (219 kernels a call): its costliest functions are asked for first;
    where ncu's log holds no kernel (the names matched none of its own), the call is measured
    again with every function but NCCL's. ncu itself cannot run here: the runs are stood in
    for by their logs (the probe's raw CSV as the second one)."""
    import kernelscope.app.counters as app_counters
    from kernelscope.engine.counters import NcuRun

    asked: list[list[str]] = []
    csv = (FIXTURES / "counters_probe" / "ncu_raw_cache_all.csv").read_text()

    async def run(*args: Any, functions: Sequence[str] = (), **kwargs: Any) -> NcuRun:
        asked.append(list(functions))
        log = "==PROF== Disconnected from process 1\n" if functions else csv
        return NcuRun(log, 12.0, 64, [])

    monkeypatch.setattr(app_counters, "run_under_ncu", run)
    side = msgspec.json.decode(
        (FIXTURES / "gpt2_prefill" / "sidecar.json").read_bytes(), type=Sidecar
    )
    trace = str(FIXTURES / "gpt2_prefill" / "trace.json.gz")
    result = JobResult(ProfileFinished(job_id="j", trace_path=trace, sidecar=side),
                       _gpu_result().ready)  # fmt: skip
    counters = asyncio.run(measure_counters(_request(), result))
    assert len(asked) == 2 and "Kernel2" in asked[0] and asked[1] == []
    assert counters.kernels and counters.functions == [] and not counters.error


def _held_for(path: str) -> bool:
    """In the analysis process: whether it holds the trace at `path` (taking it)."""
    from kernelscope.app.held_trace import HELD

    return HELD.take(path) is not None


def _copied_prefill(tmp_path: Path) -> JobResult:
    """GPT-2's prefill job (219 kernels a call), its trace in `tmp_path`, where the report
    saves the sidecar."""
    import shutil

    trace = tmp_path / "prefill.pt.trace.json.gz"
    shutil.copy(FIXTURES / "gpt2_prefill" / "trace.json.gz", trace)
    side = msgspec.json.decode(
        (FIXTURES / "gpt2_prefill" / "sidecar.json").read_bytes(), type=Sidecar
    )
    side.cold.trace_path = None
    finished = ProfileFinished(job_id="j", trace_path=str(trace), sidecar=side)
    return JobResult(finished, _gpu_result().ready)


def test_counters_read_the_trace_once_and_the_report_takes_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`--counters` reads the profile's trace to choose the kernels to measure; the report
    built after it takes that trace instead of reading the file again, and is the report
    a fresh read gives. A trace is taken once: the next report reads the file."""
    import kernelscope.app.counters as app_counters
    import kernelscope.app.held_trace as held_trace
    import kernelscope.report.build as build
    from kernelscope.app.profile import add_counters, job_report
    from kernelscope.engine.counters import NcuRun

    csv = (FIXTURES / "counters_probe" / "ncu_raw_cache_all.csv").read_text()

    async def run(*args: Any, functions: Sequence[str] = (), **kwargs: Any) -> NcuRun:
        return NcuRun(csv, 12.0, 64, [])

    reads: list[str] = []

    def counted(load: Any) -> Any:
        def load_trace(path: Any, *args: Any) -> Any:
            reads.append(str(path))
            return load(path, *args)

        return load_trace

    monkeypatch.setattr(app_counters, "run_under_ncu", run)
    monkeypatch.setattr(held_trace, "load_trace", counted(held_trace.load_trace))
    monkeypatch.setattr(build, "load_trace", counted(build.load_trace))
    result = _copied_prefill(tmp_path)
    asyncio.run(add_counters(_request(), result, None, None, None, 60.0))
    assert result.finished.sidecar.counters is not None
    assert result.finished.sidecar.counters.functions  # chosen from the trace
    held = job_report(result, str(FIXTURES / "gpt2_prefill" / "transformer.py"), "prefill")
    assert reads == [result.finished.trace_path]
    fresh = job_report(result, str(FIXTURES / "gpt2_prefill" / "transformer.py"), "prefill")
    assert reads == [result.finished.trace_path] * 2
    assert held.roofline and held.ops
    assert msgspec.json.encode(held.roofline) == msgspec.json.encode(fresh.roofline)
    assert msgspec.json.encode(held.ops) == msgspec.json.encode(fresh.ops)


def test_a_held_trace_is_let_go_for_another_file_or_a_changed_one(tmp_path: Path) -> None:
    import os
    import shutil

    from kernelscope.app.held_trace import HeldTrace

    one, two = tmp_path / "one.json.gz", tmp_path / "two.json.gz"
    for path in (one, two):
        shutil.copy(FIXTURES / "matmul_add_64" / "trace.json.gz", path)
    held = HeldTrace()
    held.read(one)
    assert held.take(two) is None and held.take(one) is not None and held.take(one) is None
    held.read(one)
    held.read(two)  # replaces it
    assert held.take(one) is None and held.take(two) is not None
    held.read(one)
    os.utime(one, ns=(1, 1))  # rewritten since it was read
    assert held.take(one) is None


def test_the_editor_chooses_the_kernels_in_its_analysis_process(tmp_path: Path) -> None:
    """The editor's server never reads the trace for `--counters`: the job service chooses
    the kernels in its analysis process, which holds the trace there for the job's report
    (the process is kept for it, though the trace is big)."""
    from kernelscope.app.held_trace import HELD, drop_held
    from kernelscope.app.jobs import ProfileService

    result = _copied_prefill(tmp_path)
    service = ProfileService()
    try:
        chosen = asyncio.run(service._choose(result.finished, 64, ""))  # pyright: ignore[reportPrivateUsage]
        assert "Kernel2" in chosen.functions
        assert HELD.take(result.finished.trace_path) is None  # not here
        assert asyncio.run(service.analysis.run(_held_for, result.finished.trace_path))
        assert not asyncio.run(service.analysis.run(_held_for, result.finished.trace_path))
        # a job cancelled under ncu lets go of it there, the process kept for the others
        asyncio.run(service._choose(result.finished, 64, ""))  # pyright: ignore[reportPrivateUsage]
        asyncio.run(service.analysis.run(drop_held))
        assert not asyncio.run(service.analysis.run(_held_for, result.finished.trace_path))
    finally:
        service.analysis.close()


def _dies(finished: ProfileFinished, launch_count: int, match: str) -> KernelPick:
    import os

    os._exit(3)


def test_an_analysis_process_that_dies_choosing_leaves_the_first_kernels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the analysis process dies reading the trace (out of memory, say), the call's
    first kernels are measured, as where the trace cannot be read: the profile stands."""
    import kernelscope.app.jobs as jobs

    monkeypatch.setattr(jobs, "costliest_kernels", _dies)
    service = jobs.ProfileService()
    try:
        finished = _copied_prefill(tmp_path).finished
        pick = asyncio.run(service._choose(finished, 64, "x"))  # pyright: ignore[reportPrivateUsage]
        assert pick.functions == [] and "failed reading the trace" in pick.error
    finally:
        service.analysis.close()
