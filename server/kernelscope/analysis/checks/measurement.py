"""KS601, KS602, KS603, KS604: findings about the measurement itself: the profiler's own
cost, profiled steps unlike each other, an unsteady timing, throttled clocks.
"""

from __future__ import annotations

import statistics
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
    # A step unlike the others (a periodic eval) is not the profiler's cost: the median step.
    uneven = uneven_step(facts)
    profiled = uneven[2] if uneven is not None else facts.cpu_us_per_step
    ratio = profiled / host
    if ratio < 1.3:
        return
    per = "per call profiled (the median step)" if uneven is not None else "per call profiled"
    yield Finding(
        Code.PROFILER_DISTORTION,
        Severity.INFO,
        f"the profiler inflates host time {ratio:.1f}×: {fmt(profiled)} {per} "
        f"vs {fmt(host)} unprofiled; small ops' CPU times here overstate their cost",
        path=facts.function_path,
        line=facts.function_line,
        try_=[
            "trust the unprofiled per-call time for the cost; use the profile for where it goes",
            "--no-stack lowers the profiler's cost",
        ],
        evidence={"profiled_us": round(profiled, 1), "unprofiled_us": round(host, 1)},
    )


UNEVEN = 3.0  # the longest profiled step against the median step


def uneven_step(facts: Facts) -> tuple[int, float, float] | None:
    """The profiled step unlike the others: (its index, its host µs, the median step's),
    where at least 3 steps were profiled and the longest took UNEVEN× the median or more."""
    each = facts.calls.host_each if facts.calls is not None else []
    if len(each) < 3:
        return None
    median = statistics.median(each)
    longest = max(range(len(each)), key=each.__getitem__)
    if median <= 0 or each[longest] < UNEVEN * median:
        return None
    return longest, each[longest], median


def find_uneven_steps(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS602: a profiled step that took several times the others (a periodic eval, a
    checkpoint, a log step): the per-step figures average it in."""
    del options
    uneven = uneven_step(facts)
    if uneven is None:
        return
    index, longest, median = uneven
    steps = len(facts.calls) if facts.calls is not None else 0
    what = facts.sidecar.call_site.step if facts.sidecar and facts.sidecar.call_site else "call"
    yield Finding(
        Code.UNEVEN_STEPS,
        Severity.INFO,
        f"the profiled {what}s are uneven: {what} {index + 1} of {steps} took {fmt(longest)} of "
        f"host time, {longest / median:.1f}× the median {fmt(median)}; the per-step figures "
        "average it in",
        path=facts.function_path,
        line=facts.function_line,
        try_=[
            "where it is a periodic eval, checkpoint or log step: --skip past it, or profile "
            "the steps between",
            "open the trace (Perfetto) and compare that step's ops with the others'",
        ],
        evidence={
            "step": index + 1,
            "longest_us": round(longest, 1),
            "median_us": round(median, 1),
        },
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
