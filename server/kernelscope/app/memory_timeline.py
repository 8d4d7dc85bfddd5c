"""A profile's memory timeline on disk, beside its trace: a PNG chart and a trace with a
counter track for Perfetto (``<stem>.memory.png``, ``<stem>.memory.json``)."""

from __future__ import annotations

import json
from pathlib import Path

from kernelscope.report.schema import Report

TRACE_SUFFIX = ".pt.trace.json.gz"


def memory_files(trace: Path) -> tuple[Path, Path]:
    """The PNG and the Perfetto trace of the memory timeline beside the run's ``trace``."""
    stem = trace.name.removesuffix(TRACE_SUFFIX).removesuffix(".json.gz").removesuffix(".json")
    return trace.with_name(stem + ".memory.png"), trace.with_name(stem + ".memory.json")


def write_memory_timeline(report: Report) -> tuple[Path, Path] | None:
    """Write the two files of the report's memory pass; None when there is no pass with a
    timeline or no trace file to put them beside. OSError when they cannot be written."""
    m = report.memory_pass
    trace = report.trace.path
    if m is None or m.error or not m.timeline or not trace:
        return None
    from kernelscope.render.memory_plot import memory_trace, render_memory_png

    png, perfetto = memory_files(Path(trace))
    name = f"{report.function.qualname} (the memory pass's call)"
    png.write_bytes(render_memory_png(m, f"{report.function.qualname}: memory pass"))
    perfetto.write_text(json.dumps(memory_trace(m, name)), encoding="utf-8")
    return png, perfetto
