"""What the per-line times can be compared with: a note where the traced pass's lines sum to
well over the call's unprofiled time. Loaded by the language server after a run (no analysis
imports at start)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelscope.units import fmt_us

if TYPE_CHECKING:
    from kernelscope.report.schema import Report

#: The lines' self CPU at more than this times the call's unprofiled time gets a note.
LINES_INFLATED = 1.5


def profiled_lines_note(report: Report) -> str:
    """Where the lines' self CPU sums to over LINES_INFLATED times the call's unprofiled time,
    a sentence that says so ("" elsewhere): the traced pass runs under the profiler, whose
    cost per op is in every line (time_sequence_prediction's LSTM cells, 5,000 small ops a
    call: 1.6 s of lines against 546 ms unprofiled)."""
    summed = sum(r.self_cpu_us for r in report.lines)
    unprofiled = report.timing.unprofiled_us_per_call
    if unprofiled <= 0 or summed <= LINES_INFLATED * unprofiled:
        return ""
    return (
        f"these lines' self CPU sums to {fmt_us(summed)} per call, "
        f"{summed / unprofiled:.1f}x the call's {fmt_us(unprofiled)} unprofiled: the "
        "profiler's cost per op is in each; compare them with each other"
    )
