"""A user's Triton kernel, run for real by Triton's interpreter on the CPU: the worker's cold
call records each launch's tensors (the bytes the roofline gives the kernel's row on a GPU,
where the trace records no shapes for it), and the kernel still computes its result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import WORKLOADS

pytest.importorskip("triton")
CPU = ("--device", "cpu", "--json", "--no-lines", "--no-memory")


def profile(spec: str, *args: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-m", "kernelscope", "profile", spec, *CPU, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def sidecar_of(report: dict[str, object]) -> dict[str, object]:
    trace = report["trace"]
    assert isinstance(trace, dict)
    path = Path(str(trace["path"]).replace(".pt.trace.json.gz", ".sidecar.json"))
    return json.loads(path.read_text())


@pytest.mark.parametrize("batch", [1, 3])
def test_the_cold_call_records_each_launch_with_its_tensors_bytes(batch: int) -> None:
    sidecar = sidecar_of(
        profile(f"{WORKLOADS / 'triton_rows.py'}::scaled", "--batch-size", str(batch))
    )
    (launch,) = sidecar["launches"]
    # in and out: 8*batch rows of 64 fp32, each tensor counted once
    assert launch == {
        "name": "scale_rows",
        "launches": 1,
        "bytes_per_launch": 2 * 8 * batch * 64 * 4,
        "tensors": 2,
    }


def test_a_function_without_triton_records_no_launch() -> None:
    assert sidecar_of(profile(f"{WORKLOADS / 'what_if.py'}::chain"))["launches"] == []
