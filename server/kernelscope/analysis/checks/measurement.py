"""KS601, KS603, KS604: findings about the measurement itself: the profiler's own cost, an
unsteady timing, throttled clocks.
"""

from __future__ import annotations

from collections.abc import Iterable

from kernelscope.analysis.facts import Facts, Options
from kernelscope.findings import Code, Finding, Severity
from kernelscope.units import fmt_us as fmt


def find_profiler_distortion(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS601: the profiler's own cost, when it inflates host time noticeably."""
    del options
    side = facts.sidecar
    if side is None or side.timing.us_per_call <= 0 or facts.cpu_us_per_step <= 0:
        return
    if side.device_type == "cuda" and facts.verdict.bound != "overhead":
        return
    # On a GPU the events time the device: the host's own time per call is the one to weigh.
    # On the CPU the median is the host's, the figure the report shows (host_us_per_call
    # is the mean: 561 ms beside a 546 ms median for time_sequence_prediction).
    host = side.timing.us_per_call
    if side.device_type == "cuda":
        host = side.timing.host_us_per_call or host
    ratio = facts.cpu_us_per_step / host
    if ratio < 1.3:
        return
    yield Finding(
        Code.PROFILER_DISTORTION,
        Severity.INFO,
        f"the profiler inflates host time {ratio:.1f}×: {fmt(facts.cpu_us_per_step)} per call "
        f"profiled vs {fmt(host)} unprofiled; small ops' CPU times here overstate their cost",
        path=facts.function_path,
        line=facts.function_line,
        try_=[
            "trust the unprofiled per-call time for the cost; use the profile for where it goes",
            "--no-stack lowers the profiler's cost",
        ],
        evidence={"profiled_us": round(facts.cpu_us_per_step, 1), "unprofiled_us": round(host, 1)},
    )


UNSTEADY = 0.2  # (p90 - p10) / median


def find_unsteady_timing(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS603: an unprofiled timing whose spread is too wide to compare runs by."""
    del options
    side = facts.sidecar
    t = side.timing if side else None
    if t is None or t.p10_us is None or t.p90_us is None or t.us_per_call <= 0:
        return
    spread = (t.p90_us - t.p10_us) / t.us_per_call
    if spread <= UNSTEADY:
        return
    calls = t.slowed.kept(t.reps) if t.slowed is not None else t.reps
    yield Finding(
        Code.UNSTEADY_TIMING,
        Severity.INFO,
        f"the unprofiled timing is unsteady: p10–p90 {fmt(t.p10_us)}–{fmt(t.p90_us)} around a "
        f"median of {fmt(t.us_per_call)} over {calls} calls ({spread:.0%} wide); differences "
        "between runs smaller than that are noise",
        path=facts.function_path,
        line=facts.function_line,
        try_=[
            "profile again; close other GPU and CPU work on this host",
            "host-bound code varies between processes: compare medians of several runs",
        ],
        evidence={"spread": round(spread, 3), "reps": calls},
    )


CLOCK_FLOOR = 0.85  # of the maximum SM clock
_REASONS = {
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "power brake",
}


def find_throttled_clocks(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS604: GPU clocks well below their maximum over the timing (NVML): not representative."""
    del options
    side = facts.sidecar
    g = side.timing.gpu if side else None
    if g is None or g.sm_clock_max_mhz <= 0:
        return
    reasons = [name for bit, name in _REASONS.items() if g.clock_event_reasons & bit]
    low = g.sm_clock_mhz < CLOCK_FLOOR * g.sm_clock_max_mhz
    gpu_bound = facts.verdict.bound not in ("overhead", "host")
    if not reasons and not (low and gpu_bound):
        return
    why = f" ({', '.join(reasons)})" if reasons else " (clocks still ramping, or limited)"
    yield Finding(
        Code.LOW_CLOCKS,
        Severity.WARNING,
        f"the GPU ran at {g.sm_clock_mhz:.0f} of its {g.sm_clock_max_mhz:.0f} MHz over the "
        f"timing{why}, {g.power_w:.0f} W, utilization {g.utilization_pct:.0f} %: the numbers "
        "may not be representative",
        path=facts.function_path,
        line=facts.function_line,
        try_=["check nvidia-smi -q -d PERFORMANCE for the clock limits; profile again"],
        evidence={"sm_clock_mhz": g.sm_clock_mhz, "sm_clock_max_mhz": g.sm_clock_max_mhz},
    )
