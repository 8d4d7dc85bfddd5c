"""Inductor's own FLOPs and bytes: the worker asks Inductor for them (``benchmark_kernel``)
without its by-product reaching the user's output, and the records Inductor writes them on
(``_RecordFunctionFast`` with its profiler kwargs, the call Inductor's launcher makes) come
out of a real profiler export in a form the analysis reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelscope.analysis.costs import bytes_of, flops_of
from kernelscope.analysis.trace_load import load_trace

from support import WORKLOADS

SPEC = f"{WORKLOADS / 'compiled_cpu.py'}::compiled"
CPU = ("--device", "cpu", "--json", "--no-lines", "--no-memory")


def test_the_worker_asks_inductor_for_its_estimates_and_keeps_the_output_clean(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path)}  # compiles: prints the line
    env.pop("TORCHINDUCTOR_BENCHMARK_KERNEL", None)
    proc = subprocess.run(
        [sys.executable, "-m", "kernelscope", "profile", SPEC, *CPU],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    printed = report["output"] + report["setup_output"]
    assert "benchmark_kernel True" in printed
    assert "Compiled module path" not in printed + proc.stderr


def test_inductors_profiler_kwargs_are_read_from_a_real_export(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(64, 64)
    kwargs = {"kernel_backend": "triton", "kernel_flop": 8192, "kernel_num_gb": 3.2768e-05}
    record = torch._C._profiler._RecordFunctionFast("triton_poi_fused_add_0", [x, x], kwargs)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof, record:
        x.add(1)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    (kernel,) = [o for o in load_trace(path).ops if o.name == "triton_poi_fused_add_0"]
    assert flops_of(kernel) == 8192
    assert bytes_of(kernel) == pytest.approx(32_768)  # not the two buffers' 2 x 16 kB + output
