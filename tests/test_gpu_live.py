"""The live GPU path: runs where torch sees a CUDA GPU (the H200 host), skipped elsewhere."""

from __future__ import annotations

import os
import statistics

import pytest

from conftest import NEEDS_GPU, REPO_ROOT, LauncherDriver, failed, ok

pytestmark = NEEDS_GPU
MATMUL = f"{REPO_ROOT}/fixtures/workloads/matmul_add.py::matmul_add"


def _cuda_event_median(n: int) -> float:
    import torch

    a, b, c = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for _ in range(5):
        a @ b + c
    samples = []
    for _ in range(30):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a @ b + c
        e.record()
        e.synchronize()
        samples.append(s.elapsed_time(e) * 1e3)
    return statistics.median(samples)


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

    from lsp_helpers import open_doc, profile, start, stop

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
