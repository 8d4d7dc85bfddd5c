"""flex_attention's block mask, live: the worker reads the density of each BlockMask alive
after the cold call (a causal 4x4-block mask computes 10 of 16 blocks), which a compiled
flex_attention's FLOPs need and its trace does not hold."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support import WORKLOADS

SPEC = f"{WORKLOADS / 'flex_mask.py'}::attend"
CPU = ("--device", "cpu", "--json", "--no-lines", "--no-memory")


def test_the_sidecar_has_the_live_masks_density() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kernelscope", "profile", SPEC, *CPU],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    trace = json.loads(proc.stdout)["trace"]["path"]
    sidecar = json.loads(Path(trace.replace(".pt.trace.json.gz", ".sidecar.json")).read_text())
    assert sidecar["block_masks"] == [
        {"shape": [1, 1, 512, 512], "block_size": [128, 128], "sparsity": 37.5}
    ]
