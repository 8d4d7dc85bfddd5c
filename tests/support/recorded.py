"""The analysis of a workload recorded on the H200 (fixtures/<name>/, fixtures/record_real.py):
kernelscope's own trace with its sidecar and cold trace, or the raw torch.profiler trace alone,
against the H200's datasheet peaks (so the numbers do not depend on this machine)."""

from __future__ import annotations

from typing import Any

import msgspec

from kernelscope.analysis.diagnose import Analysis, analyze
from kernelscope.analysis.facts import Options
from kernelscope.analysis.peaks import datasheet_peaks
from kernelscope.analysis.trace_load import load_trace
from kernelscope.protocol import Sidecar

from support import FIXTURES

H200 = datasheet_peaks("NVIDIA H200")


def analyzed(name: str, raw: bool = False, **sidecar: Any) -> Analysis:
    """fixtures/`name`'s live trace with its sidecar (its fields replaced by `sidecar`'s),
    or its raw trace alone."""
    folder = FIXTURES / name
    options = Options(peaks=H200)
    if raw:
        return analyze(load_trace(folder / "raw.json.gz"), None, options)
    side = msgspec.json.decode((folder / "sidecar.json").read_bytes(), type=Sidecar)
    side = msgspec.structs.replace(side, **sidecar)
    cold = load_trace(folder / "cold.json.gz")
    return analyze(load_trace(folder / "trace.json.gz"), side, options, cold_trace=cold)
