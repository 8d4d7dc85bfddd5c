"""A fixture's rows under Nsight Compute and its trace's model of them: the roofline rows a
``--counters`` report marked measured, and the rows `analyze` makes of a trace."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

from kernelscope.analysis.diagnose import analyze
from kernelscope.analysis.roofline import OpRoof
from kernelscope.analysis.trace_load import load_trace


@cache
def trace_rows(trace: Path) -> tuple[OpRoof, ...]:
    """The roofline of a recorded trace, as `kernelscope analyze` makes it."""
    return tuple(analyze(load_trace(trace), None).roofline)


def measured_rows(report: Path) -> list[dict[str, Any]]:
    """The rows of a ``--json`` report (gzipped where it ends in .gz) that Nsight Compute
    measured."""
    text = gzip.decompress(report.read_bytes()) if report.suffix == ".gz" else report.read_text()
    return [r for r in json.loads(text)["roofline"] if r.get("measured")]
