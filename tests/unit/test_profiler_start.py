"""The worker's profiler starts without importing Inductor (its lazy import was the first
profile's whole cost), and ``torch._inductor`` still imports lazily for the user after."""

from __future__ import annotations

import subprocess
import sys

from support import REPO_ROOT

SNIPPET = r"""
import sys, time
import torch
from kernelscope.worker.program.profiler_start import skip_inductor_import
from torch.profiler import ProfilerActivity, profile
skip_inductor_import(torch)
skip_inductor_import(torch)  # once is enough: wrapping twice is a no-op
x = torch.ones(8)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=True) as p:
    (x + x).sum()
assert "torch._inductor" not in sys.modules, "the profiler imported Inductor"
assert any(e.name == "aten::add" for e in p.events()), "the profile recorded nothing"
assert torch._inductor.config.triton.cudagraphs is False  # the lazy import still works
with profile(activities=[ProfilerActivity.CPU]):  # with Inductor loaded: the real check
    (x + x).sum()
print("ok")
"""


def test_the_profiler_starts_without_importing_inductor() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SNIPPET],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(REPO_ROOT / "server"), "KINETO_LOG_LEVEL": "99"},
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
