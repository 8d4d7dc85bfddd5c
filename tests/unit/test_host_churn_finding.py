"""KS133 on the host (analysis/checks/host_memory.py): page faults every call with the system
time they cost, from the unprofiled timing's getrusage figures; nothing for a loop on a
caching allocator or one whose faults cost little."""

from __future__ import annotations

import msgspec

from kernelscope.analysis.diagnose import analyze
from kernelscope.analysis.trace_load import decode_trace
from kernelscope.findings import Code

from support.sidecars import cpu_sidecar
from support.traces import CPU_ONLY, dumps


def churn(faults: float | None, user: float, system: float) -> list[str]:
    side = cpu_sidecar(us_per_call=115_000.0)
    side.timing = msgspec.structs.replace(
        side.timing, minor_faults_per_call=faults, user_us_per_call=user,
        system_us_per_call=system,
    )  # fmt: skip
    found = analyze(decode_trace(dumps(CPU_ONLY)), side).findings
    return [f.message for f in found if f.code == Code.ALLOCATOR_CHURN]


def test_faults_every_call_with_their_system_time_are_named() -> None:
    """word_language_model's LSTM step on 2 vCPUs (docs/tries/word_language_model_2026-12-06.md)."""
    (message,) = churn(55_872.0, 173_300.0, 60_860.0)
    assert message == (
        "the host's allocator gives memory back to the OS and takes it again: 55,872 page "
        "faults a call (218.2 MiB of pages), and 60.86 ms a call of system time, 26% of the "
        "process's CPU time while the calls were timed"
    )


def test_few_faults_or_cheap_ones_or_none_read_say_nothing() -> None:
    assert churn(3_666.0, 138_500.0, 7_962.0) == []  # TCMalloc: a heap that grew a little
    assert churn(16_385.0, 700_000.0, 18_000.0) == []  # 2.5 % of the CPU time
    assert churn(None, 0.0, 0.0) == []  # a timing from before 2026-12-06, or Windows
