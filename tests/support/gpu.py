"""Whether this process's torch sees a CUDA GPU, and the skip of the tests that need one."""

from __future__ import annotations

import pytest


def cuda_available() -> bool:
    """Whether this test process's torch sees a CUDA GPU."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


NEEDS_GPU = pytest.mark.skipif(
    not cuda_available(),
    reason="needs a CUDA GPU (none here); the GPU path is covered by the recorded H200 "
    "fixtures in tests/unit/test_gpu_fixtures.py",
)


FRESH_TIMER = r"""
import importlib.util, json, statistics, sys, time, torch
path, qual = sys.argv[1].split("::")
spec = importlib.util.spec_from_file_location("wl", path)
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
args = getattr(mod, qual + "_inputs")(device="cuda")
fn = getattr(mod, qual)
for _ in range(10):
    fn(*args)
torch.cuda.synchronize()
t = time.perf_counter()
for _ in range(50):
    fn(*args)
torch.cuda.synchronize()
print(json.dumps((time.perf_counter() - t) * 1e6 / 50))
"""


def fresh_us(spec: str) -> float:
    """Per-call time of `spec` back to back in a fresh process that never profiled."""
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", FRESH_TIMER, spec], capture_output=True, text=True, check=True
    )
    return float(json.loads(done.stdout))
