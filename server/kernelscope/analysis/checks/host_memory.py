"""KS133 on the host: a warm call whose process took memory from the OS again and again,
read from the unprofiled timing's page faults and system CPU time (getrusage over the timed
calls, Linux). glibc's malloc gives a freed block over its mmap threshold (at most 32 MiB)
back to the OS, and the next call's tensor of that size faults every page in again:
pytorch/examples' word_language_model on 2 vCPUs, 55,872 faults and 60.9 ms of system time in
a 118.5 ms iteration; 71.7 ms under TCMalloc (docs/tries/word_language_model_2026-12-06.md).
Faults of memory the process keeps (its resident memory grew by half their bytes or more: a
cache, outputs collected) are not churn, and say nothing."""

from __future__ import annotations

from collections.abc import Iterable

from kernelscope.analysis.facts import Facts, Options
from kernelscope.findings import Code, Finding, Severity
from kernelscope.units import fmt_bytes, fmt_us

#: The page size where the timing did not say (4 KiB on x86-64 and most Arm hosts).
PAGE = 4096
#: Bytes of pages faulted in a call at least, and system time at least this share of the
#: process's CPU time over the timed calls: a steady loop on a caching allocator faults none.
MIN_FAULTED = 16 * 2**20
MIN_SYSTEM_SHARE = 0.10
#: Faults whose bytes the resident memory grew by, at this share or more, are of memory kept.
KEPT = 0.5


def find_host_churn(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS133 (host): page faults every call, with the system time they cost."""
    del options
    side = facts.sidecar
    if side is None:
        return
    t = side.timing
    faults, user, system = t.minor_faults_per_call, t.user_us_per_call, t.system_us_per_call
    if faults is None or user is None or system is None:
        return
    faulted = faults * (t.page_bytes or PAGE)
    share = system / (user + system) if user + system > 0 else 0.0
    if faulted < MIN_FAULTED or share < MIN_SYSTEM_SHARE:
        return
    if (t.resident_growth_per_call or 0.0) >= KEPT * faulted:
        return
    yield Finding(
        Code.ALLOCATOR_CHURN,
        Severity.WARNING,
        f"the host's allocator gives memory back to the OS and takes it again: {faults:,.0f} "
        f"page faults a call ({fmt_bytes(faulted)} of pages), and {fmt_us(system)} a "
        f"call of system time, {share:.0%} of the process's CPU time while the calls were "
        "timed",
        path=facts.function_path,
        line=facts.function_line,
        try_=[
            "an allocator that keeps freed memory: LD_PRELOAD=libtcmalloc_minimal.so.4 "
            "(TCMalloc), or jemalloc with MALLOC_CONF=oversize_threshold:0,"
            "background_thread:true,metadata_thp:auto,dirty_decay_ms:-1,muzzy_decay_ms:-1 (its "
            "defaults give memory back too)",
            "with glibc's malloc: MALLOC_MMAP_THRESHOLD_=4000000000 "
            "MALLOC_TRIM_THRESHOLD_=4000000000 in the environment (both: freed blocks stay "
            "in the heap)",
        ],
        evidence={
            "minor_faults_per_call": round(faults, 1),
            "system_us_per_call": round(system, 1),
            "user_us_per_call": round(user, 1),
            "system_share": round(share, 3),
            "resident_growth_per_call": round(t.resident_growth_per_call or 0.0, 1),
        },
    )
