"""A CUDA job through a `command` remote (no ssh): the shipped files run on the GPU and the
traces come back. Runs where torch sees a CUDA GPU, skipped elsewhere; the rest of the remote
path is in tests/integration/test_remote_jobs.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kernelscope.engine.launcher import Launcher
from kernelscope.engine.remotes import Remote

from support.gpu import NEEDS_GPU
from support.jobs import ok
from support.remote_project import HELPERS, Driver, line_of, write_project


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's project: a package whose module imports a sibling."""
    return write_project(tmp_path_factory.mktemp("remote") / "proj")


@NEEDS_GPU
def test_a_remote_job_on_the_gpu(files: Path) -> None:
    plain = Remote("gpu", "command", prefix=("env", "KS_REMOTE_MARK=gpu"), python=sys.executable)
    d = Driver(Launcher(remote=plain), files)
    try:
        result = ok(d.run("forward_gpu", device="cuda"))
        report = d.report(result, "forward_gpu")
    finally:
        d.close()
    side = result.finished.sidecar
    assert side.device_type == "cuda" and side.timing.method == "cuda_events"
    assert side.cold.entry_to_first_kernel_us is not None
    assert report.runner.remote == "gpu"
    cube = (str(files / "pkg" / "helpers.py"), line_of(HELPERS, "x @ x @ x @ x"))
    assert (report.lines[0].path, report.lines[0].line) == cube  # costliest by CUDA time
    assert report.lines[0].cuda_us > 0
    assert report.timing.cuda_us_per_step > 0
    assert Path(report.trace.path).is_relative_to(files / ".kernelscope" / "traces")
