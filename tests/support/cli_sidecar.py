"""A CPU profile through the CLI, and the sidecar it saved beside its trace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

CPU = ("--device", "cpu", "--json", "--no-lines", "--no-memory")


def cpu_sidecar(spec: str) -> dict[str, Any]:
    """`kernelscope profile SPEC` on the CPU (no line or memory pass): its sidecar, as JSON."""
    proc = subprocess.run(
        [sys.executable, "-m", "kernelscope", "profile", spec, *CPU],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    trace = json.loads(proc.stdout)["trace"]["path"]
    return json.loads(Path(trace.replace(".pt.trace.json.gz", ".sidecar.json")).read_text())
