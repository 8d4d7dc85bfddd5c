"""`--counters` live: where torch sees a CUDA GPU and Nsight Compute is on PATH (the H200
host), a profile's roofline rows take the bytes and FLOPs ncu measured on one warm call."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from support import REPO_ROOT
from support.gpu import NEEDS_GPU

pytestmark = [
    NEEDS_GPU,
    pytest.mark.skipif(shutil.which("ncu") is None, reason="needs Nsight Compute's ncu on PATH"),
]


def test_a_gemms_rows_are_measured_by_nsight_compute() -> None:
    n = 4096
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernelscope",
            "profile",
            f"{REPO_ROOT}/fixtures/workloads/matmul_add.py::matmul_add",
            "--device",
            "cuda",
            "--counters",
            "--no-lines",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
        env={**os.environ, "KS_MATMUL_N": str(n)},
    )
    report = json.loads(proc.stdout)
    counters = report["counters"]
    assert proc.returncode == 0, counters["error"] or proc.stderr[-2000:]
    assert len(counters["kernels"]) >= 2 and counters["seconds"] > 0
    rows = {r["name"]: r for r in report["roofline"]}
    mm = rows["aten::mm"]
    assert mm["measured"]
    assert mm["flops_per_step"] == pytest.approx(2 * n**3, rel=0.05)
    assert mm["bytes_per_step"] >= 3 * n * n * 2  # each bf16 operand at least once
    assert rows["aten::add"]["measured"]
