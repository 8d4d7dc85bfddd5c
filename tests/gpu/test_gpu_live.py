"""The live GPU path: runs where torch sees a CUDA GPU (the H200 host), skipped elsewhere."""

from __future__ import annotations

import os
import statistics

import pytest

from support import REPO_ROOT
from support.gpu import NEEDS_GPU, fresh_us
from support.jobs import LauncherDriver, failed, ok

pytestmark = NEEDS_GPU
MATMUL = f"{REPO_ROOT}/fixtures/workloads/matmul_add.py::matmul_add"


def _cuda_event_median(n: int) -> float:
    import torch

    a, b, c = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for _ in range(5):
        a @ b + c
    # Back to back, as the worker times: a call that starts from an idle GPU (each one
    # synchronized) pays the ramp too, 10-20 % of a 200 µs GEMM on an H200.
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(30)
    ]
    for s, e in events:
        s.record()
        a @ b + c
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in events)


def test_large_matmul_cuda_time_agrees_with_cuda_events(driver: LauncherDriver) -> None:
    os.environ["KS_MATMUL_N"] = "4096"
    try:
        result = ok(driver.run(MATMUL, device="cuda", wait=1, warmup=3, active=5))
    finally:
        del os.environ["KS_MATMUL_N"]
    side = result.finished.sidecar
    assert side.device_type == "cuda"
    assert side.cold.entry_to_first_kernel_us is not None
    assert side.memory is not None and side.memory.peak_allocated_bytes > 3 * 4096 * 4096 * 2
    assert side.timing.method == "cuda_events"
    assert side.timing.us_per_call == pytest.approx(_cuda_event_median(4096), rel=0.15)
    line = next(s for s in side.lines if s.line == 11)
    assert line.cuda_us > 0.5 * side.timing.us_per_call


def test_real_out_of_memory_keeps_the_worker(driver: LauncherDriver) -> None:
    f = failed(driver.run(f"{REPO_ROOT}/tests/workloads/gpu_checks.py::real_oom", device="cuda"))
    assert f.kind == "cuda_oom"
    assert f.line == 6
    ok(driver.run(MATMUL, device="cuda"))


async def test_language_server_profiles_on_the_gpu(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    from lsprotocol import types as lsp

    from support.lsp import open_doc, profile, start, stop

    project = tmp_path / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
    shutil.copy(f"{REPO_ROOT}/fixtures/workloads/matmul_add.py", project / "matmul_add.py")
    client = await start(
        project, settings={"device": "cuda", "schedule": {"wait": 1, "warmup": 3, "active": 5}}
    )
    try:
        uri = open_doc(client, project / "matmul_add.py")
        result = await profile(client, uri, "matmul_add")
        assert result["ok"], result
        codes = {d.code for d in client.diagnostics[uri]}
        assert "KS101" in codes  # n=1024 bf16: overhead-bound on an H200
        assert "KS110" in codes
        hover = await client.text_document_hover_async(
            lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(9, 5))
        )
        assert hover is not None and "CUDA**" in hover.contents.value  # type: ignore[union-attr]
    finally:
        await stop(client)


def test_host_bound_timing_agrees_with_fresh_processes(driver: LauncherDriver) -> None:
    """Within the spread of fresh processes: on the H200 host the same host-bound loop runs
    650-980 µs from one process to the next (docs/h200-run/host_bound_spread.txt), so one
    fresh process is no yardstick for another."""
    spec = f"{REPO_ROOT}/fixtures/workloads/host_bound.py::many_small"
    fresh = sorted(fresh_us(spec) for _ in range(5))
    timing = ok(driver.run(spec, device="cuda")).finished.sidecar.timing
    assert timing.process == "clean worker"
    print(f"fresh {' '.join(f'{f:.1f}' for f in fresh)} µs, clean worker "
          f"{timing.us_per_call:.1f} µs, profiling worker "
          f"{timing.profiling_worker_us_per_call:.1f} µs")  # fmt: skip
    assert 0.95 * fresh[0] <= timing.us_per_call <= 1.05 * fresh[-1]


def test_a_training_step_counts_its_backward(driver: LauncherDriver) -> None:
    from kernelscope.report.build import report_for_job

    spec = f"{REPO_ROOT}/fixtures/workloads/train_mlp.py::train_step"
    fresh = fresh_us(spec)  # GPU-bound: back to back, one call per GPU time
    result = ok(driver.run(spec, device="cuda", wait=1, warmup=3, active=5))
    report = report_for_job(result.finished, spec.split("::", maxsplit=1)[0], "train_step")
    assert report.timing.cuda_us_per_step == pytest.approx(fresh, rel=0.05)
    backward = next(line for line in result.finished.sidecar.lines if line.line == 24)
    assert backward.cuda_us > 0.4 * report.timing.cuda_us_per_step  # loss.backward()


def test_a_provider_without_device_builds_on_the_jobs_device(driver: LauncherDriver) -> None:
    spec = f"{REPO_ROOT}/tests/workloads/placement.py::built"
    result = ok(driver.run(spec, device="cuda", line_pass=False))
    assert "built on cuda" in result.finished.output
