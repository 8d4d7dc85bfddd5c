"""KS133 on the host (analysis/checks/host_memory.py): page faults every call with the system
time they cost, from the unprofiled timing's getrusage figures; nothing for a loop on a
caching allocator or one whose faults cost little."""

from __future__ import annotations

import msgspec
import pytest

from kernelscope.analysis.diagnose import analyze
from kernelscope.analysis.trace_load import decode_trace
from kernelscope.findings import Code
from kernelscope.worker.program import host_usage

from support.sidecars import cpu_sidecar
from support.traces import CPU_ONLY, dumps


def churn(
    faults: float | None, user: float, system: float, grown: float = 0.0, page: int = 4096
) -> list[str]:
    side = cpu_sidecar(us_per_call=115_000.0)
    side.timing = msgspec.structs.replace(
        side.timing, minor_faults_per_call=faults, user_us_per_call=user,
        system_us_per_call=system, resident_growth_per_call=grown, page_bytes=page,
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


def test_faults_of_memory_the_process_keeps_are_not_churn() -> None:
    """Resident memory grown by half the faulted bytes or more: a cache, outputs collected."""
    assert churn(55_872.0, 173_300.0, 60_860.0, grown=0.6 * 55_872 * 4096) == []
    assert churn(55_872.0, 173_300.0, 60_860.0, grown=-184_320.0)  # given back: churn


def test_the_page_size_is_the_hosts() -> None:
    """64 KiB pages (some aarch64 kernels): 1,024 faults are 64 MiB."""
    (message,) = churn(1_024.0, 10_000.0, 5_000.0, page=65_536)
    assert "1,024 page faults a call (64.0 MiB of pages)" in message


def test_no_reading_off_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    """Elsewhere getrusage's counts mean other things: the timing has none."""
    monkeypatch.setattr(host_usage, "LINUX", False)
    clock = host_usage.UsageClock()
    clock.start()
    clock.stop()
    assert clock.fields(10) == dict.fromkeys(
        ["minor_faults_per_call", "user_us_per_call", "system_us_per_call",
         "resident_growth_per_call", "page_bytes"],
    )  # fmt: skip


def test_a_clock_reads_each_span_and_sums_those_kept() -> None:
    clock = host_usage.UsageClock()
    for _ in range(3):
        clock.start()
        sum(range(10_000))
        clock.stop()
    assert len(clock.spans) == 3
    fields = clock.fields(2, first=1)
    assert fields["page_bytes"] == host_usage.resource.getpagesize()  # type: ignore[union-attr]
    assert fields["user_us_per_call"] is not None and fields["user_us_per_call"] >= 0
