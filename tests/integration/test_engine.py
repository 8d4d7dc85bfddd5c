"""The worker through the launcher: inputs, lines, timings, unsaved buffers, device choice."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from kernelscope.analysis.trace_load import load_trace
from kernelscope.engine.launcher import Launcher, WorkerState
from kernelscope.engine.runner import JobResult
from kernelscope.engine.targets import Schedule, build_request, load_target
from kernelscope.protocol import JobProgress

from support import WORKLOADS
from support.gpu import cuda_available
from support.jobs import LauncherDriver, failed, ok

THREE = WORKLOADS / "three_lines.py"


def test_three_lines_matmul_line_is_costliest(driver: LauncherDriver) -> None:
    result = ok(driver.run(f"{THREE}::three_lines"))
    side = result.finished.sidecar
    by_line = {s.line: s for s in side.lines if s.path == str(THREE)}
    assert set(by_line) >= {5, 6, 7}
    assert by_line[6].self_cpu_us > by_line[5].self_cpu_us
    assert by_line[6].self_cpu_us > by_line[7].self_cpu_us
    assert "aten::matmul" in by_line[6].top_ops
    assert side.function_line == 4
    assert side.device_type == "cpu"
    assert (side.wait, side.warmup, side.active) == (1, 1, 2)


def test_trace_and_cold_trace_are_written(driver: LauncherDriver) -> None:
    result = ok(driver.run(f"{THREE}::three_lines"))
    assert Path(result.finished.trace_path).stat().st_size > 0
    assert result.finished.trace_path.endswith(".pt.trace.json.gz")
    cold = result.finished.sidecar.cold
    assert cold.trace_path and Path(cold.trace_path).is_file()
    assert cold.first_call_us > 0
    assert cold.entry_to_first_kernel_us is None  # no GPU here


def test_unprofiled_timing_is_reported(driver: LauncherDriver) -> None:
    timing = ok(driver.run(f"{THREE}::three_lines")).finished.sidecar.timing
    assert timing.method == "perf_counter"
    assert timing.reps >= 5
    assert len(timing.samples_us) == min(timing.reps, 200)
    assert timing.us_per_call > 0


def traced_ops(result: JobResult) -> set[str]:
    """The aten ops in a finished job's trace."""
    return {op.name for op in load_trace(result.finished.trace_path).cpu_ops}


def test_callee_lines_in_the_project_are_attributed(driver: LauncherDriver) -> None:
    side = ok(driver.run(f"{THREE}::helper_calls")).finished.sidecar
    by_line = {s.line: s for s in side.lines}
    # line 13 calls square(); its total includes line 18 (the matmul inside square), less
    # what the tracer's mean cost overcorrects in its own time: totals stay signed sums
    # (tests/unit/test_worker_lines.py), a few µs below the callee's where line 13's own
    # read under the mean cost (9199.4 against 9202.4 µs, line 13's tracer share 18.9 µs)
    assert 18 in by_line
    assert by_line[13].cpu_total_us >= by_line[18].cpu_total_us - by_line[13].tracer_us
    assert by_line[13].self_cpu_us < by_line[13].cpu_total_us


def test_method_with_instance_from_provider(driver: LauncherDriver) -> None:
    side = ok(driver.run(f"{THREE}::Scaler.scale")).finished.sidecar
    assert any(s.line == 26 for s in side.lines)


def test_provider_dict_form_and_batch_size(driver: LauncherDriver) -> None:
    result = ok(driver.run(f"{THREE}::sized", batch_size=4))
    assert "aten::sum" in traced_ops(result)


def test_batch_size_needs_a_provider_parameter(driver: LauncherDriver) -> None:
    f = failed(driver.run(f"{THREE}::Scaler.scale", batch_size=2))
    assert f.kind == "missing_inputs"
    assert "batch_size" in f.message


def test_pyproject_inputs_mapping(driver: LauncherDriver) -> None:
    result = ok(driver.run(f"{WORKLOADS}/mapped/pkg/model.py::forward"))
    assert "aten::mul" in traced_ops(result)


def test_unsaved_source_is_profiled_as_the_editor_has_it(driver: LauncherDriver) -> None:
    source = THREE.read_text().replace("b = a @ a @ a @ a", "b = a.cos()")
    side = ok(driver.run(f"{THREE}::three_lines", source=source)).finished.sidecar
    by_line = {s.line: s for s in side.lines}
    assert "aten::cos" in by_line[6].top_ops


def test_user_modules_are_reimported_fresh(driver: LauncherDriver, tmp_path: Path) -> None:
    mod = tmp_path / "fresh.py"
    mod.write_text("import torch\n\ndef f():\n    return torch.ones(2).sum()\n")
    ok(driver.run(f"{mod}::f"))
    mod.write_text("import torch\n\ndef f():\n    return torch.ones(2).cos()\n")
    assert "aten::cos" in traced_ops(ok(driver.run(f"{mod}::f")))


def test_progress_stages_in_order(driver: LauncherDriver) -> None:
    ok(driver.run(f"{THREE}::three_lines"))
    stages = [p.stage for p in driver.progress]
    first = {s: stages.index(s) for s in dict.fromkeys(stages)}
    order = ["import", "inputs", "cold", "timing", "wait", "warmup", "active", "export", "lines"]
    order.append("memory")
    assert [s for s in order if s in first] == order
    assert [first[s] for s in order] == sorted(first[s] for s in order)


@pytest.mark.skipif(cuda_available(), reason="this host has a CUDA GPU: no error to provoke")
def test_cuda_request_without_gpu_is_a_clear_error(driver: LauncherDriver) -> None:
    f = failed(driver.run(f"{THREE}::three_lines", device="cuda"))
    assert f.kind == "no_cuda"
    f = failed(driver.run(f"{THREE}::three_lines", device="tpu"))
    assert f.kind == "bad_device"


def test_worker_is_reused_between_jobs(driver: LauncherDriver) -> None:
    first = ok(driver.run(f"{THREE}::three_lines")).ready.pid
    second = ok(driver.run(f"{THREE}::three_lines")).ready.pid
    assert first == second


def test_a_provider_that_takes_device_gets_its_values_as_returned(driver: LauncherDriver) -> None:
    result = ok(driver.run(f"{WORKLOADS}/placement.py::kept", line_pass=False))
    assert "moves=0" in result.finished.output


def test_a_provider_without_device_has_its_values_moved(driver: LauncherDriver) -> None:
    result = ok(driver.run(f"{WORKLOADS}/placement.py::moved", line_pass=False))
    assert "moves=1" in result.finished.output


def test_stage_timings_and_timing_spread_in_the_sidecar(driver: LauncherDriver) -> None:
    side = ok(driver.run(f"{THREE}::three_lines")).finished.sidecar
    assert list(side.stages_s) == [
        "import",
        "inputs",
        "cold",
        "timing",
        "schedule",
        "export",
        "lines",
        "memory",
    ]
    assert all(s >= 0 for s in side.stages_s.values())
    t = side.timing
    assert t.p10_us is not None and t.p90_us is not None
    assert t.p10_us <= t.us_per_call <= t.p90_us
    assert t.gpu is None  # CPU job: no NVML sampling


def test_host_bound_calls_are_timed_again_in_a_worker_that_never_profiled(
    driver: LauncherDriver,
) -> None:
    """Timed again (as host-bound GPU calls are; "always" here, on CPU): the unprofiled
    timing comes from the clean worker, with the profiling worker's figure kept beside it."""
    driver.launcher.clean_timing = "always"
    try:
        side = ok(driver.run(f"{THREE}::three_lines", line_pass=False)).finished.sidecar
    finally:
        driver.launcher.clean_timing = "auto"
    t = side.timing
    assert t.process == "clean worker"
    assert t.profiling_worker_us_per_call is not None and t.profiling_worker_us_per_call > 0
    assert t.method == "perf_counter" and t.reps >= 20
    # judged against the host's best too: the loops the two workers read at their start and
    # the profiling worker's timing, the fastest sent with the job
    assert t.host_reference_us is not None and 0 < t.host_reference_us < 10_000
    launcher = driver.launcher
    workers = (launcher.worker, launcher._timer)  # pyright: ignore[reportPrivateUsage]
    readings = [w.ready.reference_us for w in workers if w is not None and w.ready is not None]
    assert len(readings) == 2 and all(r is not None and r > 0 for r in readings)
    profiled = launcher._profiled_best  # pyright: ignore[reportPrivateUsage]
    assert profiled and t.host_reference_us == min([r for r in readings if r] + [profiled])
    assert t.reference_us is not None and t.reference_us > 0
    timer = driver.launcher._timer  # pyright: ignore[reportPrivateUsage]
    assert timer is not None and timer.pid != driver.launcher.worker.pid  # type: ignore[union-attr]
    stages = [p.stage for p in driver.progress]
    assert stages[-1] == "clean_timing"


def test_a_cpu_call_is_timed_once_where_it_was_profiled(driver: LauncherDriver) -> None:
    """Without CUPTI the profiler leaves no slowdown behind: no second worker for CPU jobs."""
    assert driver.launcher.clean_timing == "auto"
    result = ok(driver.run(f"{THREE}::three_lines", line_pass=False))
    assert result.finished.sidecar.timing.process == "profiling worker"
    assert "clean timing" not in result.stages_s


def test_both_workers_start_together_before_anything_is_measured(tmp_path: Path) -> None:
    """The clean worker starts with the profiling one (not after the first job), and the
    job's first stage comes only once it is ready: its start (``import torch``) does not
    run beside the measured calls, and its wait is not added after them."""
    launcher = Launcher(python=sys.executable, clean_timing="always")
    loop = asyncio.new_event_loop()
    seen: list[tuple[str, WorkerState]] = []

    async def first_job() -> JobResult:
        launcher.start()
        timer = launcher._timer  # pyright: ignore[reportPrivateUsage]
        assert timer is not None and timer.state is WorkerState.STARTING  # by start() alone

        def progress(msg: JobProgress) -> None:
            seen.append((msg.stage, timer.state))

        request = build_request(
            load_target(f"{THREE}::three_lines"),
            tmp_path / "traces",
            Schedule(1, 1, 2),
            device="cpu",
            line_pass=False,
        )
        result = await launcher.profile(request, progress, 120.0)
        assert launcher._timer is timer  # pyright: ignore[reportPrivateUsage]
        return result

    try:
        result = loop.run_until_complete(first_job())
    finally:
        loop.run_until_complete(launcher.close())
        loop.close()
    assert seen and seen[0][1] is WorkerState.READY, seen
    timing = result.finished.sidecar.timing
    assert timing.process == "clean worker" and timing.reps >= 20
    # each worker warmed up as a loop does (blocks of 1, 2, 4 ... calls) and says how many
    # calls that took: the user's time, in the cold stage (bench/loop_latency.py counts them)
    assert timing.warmup_calls >= 3 and result.finished.sidecar.cold.warmup_calls >= 3


def test_the_line_pass_takes_the_tracers_own_cost_out_of_pure_python_lines(
    driver: LauncherDriver,
) -> None:
    """A comprehension of 2000 items is 2000 line runs under ``sys.settrace``, each with a
    range: most of its traced time is the tracer's, measured on a calibration at the start
    of the pass and taken out (the report says by how much)."""
    from kernelscope.render.text import render_report
    from kernelscope.report.build import report_for_job

    spec = WORKLOADS / "pure_python.py"
    result = ok(driver.run(f"{spec}::rows"))
    side = result.finished.sidecar
    cost = side.line_tracer
    assert cost is not None and cost.in_line_us > 0 and cost.hits > 1000
    line = next(s for s in side.lines if s.line == 8)
    assert line.hits == pytest.approx(2001, abs=2)
    raw = line.self_cpu_us + line.tracer_us
    # most of the traced time was the tracer's (a quiet machine: nearly all of it)
    assert line.self_cpu_us >= 0 and 0.25 * raw <= line.tracer_us <= raw
    report = report_for_job(result.finished, str(spec), "rows", result.ready)
    assert report.line_tracer == cost
    assert "corrected: the tracer's own" in render_report(report)


def test_the_clean_worker_keeps_to_a_fresh_processs_state(
    driver: LauncherDriver, tmp_path: Path
) -> None:
    """No Inductor benchmark harness and no frozen garbage collector in the worker that
    stands in for the user's process; the profiling worker keeps both (Inductor's FLOPs, and
    collections that skip torch's objects)."""
    seen = tmp_path / "seen.txt"
    source = tmp_path / "state.py"
    source.write_text(
        "import gc, os\n\n\n"
        "def state():\n"
        f"    with open({str(seen)!r}, 'a') as f:\n"
        "        env = os.environ.get('TORCHINDUCTOR_BENCHMARK_KERNEL')\n"
        "        f.write(f'{os.getpid()} {env} {gc.get_freeze_count()}\\n')\n"
    )
    driver.launcher.clean_timing = "always"
    try:
        ok(driver.run(f"{source}::state", line_pass=False))
    finally:
        driver.launcher.clean_timing = "auto"
    timer = driver.launcher._timer  # pyright: ignore[reportPrivateUsage]
    assert timer is not None
    by_pid = {pid: (env, int(frozen)) for pid, env, frozen in
              (line.split() for line in seen.read_text().splitlines())}  # fmt: skip
    env, frozen = by_pid[str(driver.launcher.worker.pid)]  # type: ignore[union-attr]
    assert env == "1" and frozen > 0
    assert by_pid[str(timer.pid)] == ("None", 0)


def test_no_garbage_collection_runs_inside_the_line_pass(
    driver: LauncherDriver, tmp_path: Path
) -> None:
    """A replayed call is the same every time, so a collection falls on the same line each
    pass and its pause reads as that line's cost (33 ms on an eval-mode dropout in a 15 ms
    call of karpathy/ng-video-lecture's gpt.py): the pass runs with the collector off (it
    collects just before), and the untraced calls with it as the program has it (the memory
    pass, traced too, keeps it: what a collection frees is part of what a line holds)."""
    seen = tmp_path / "seen.txt"
    source = tmp_path / "collector.py"
    source.write_text(
        "import gc, sys\n\n\n"
        "def collector():\n"
        f"    with open({str(seen)!r}, 'a') as f:\n"
        "        f.write(f'{sys.gettrace() is not None} {gc.isenabled()}\\n')\n"
    )
    ok(driver.run(f"{source}::collector"))
    calls = [tuple(line.split()) for line in seen.read_text().splitlines()]
    assert calls.count(("True", "False")) == 2  # traced, the collector off: the line pass
    assert set(calls) == {("True", "False"), ("True", "True"), ("False", "True")}
