"""KS601, KS602, KS603, KS604, KS605: findings about the measurement itself: the profiler's
own cost, profiled steps unlike each other, an unsteady timing, throttled clocks, threads
that waited for a CPU.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from kernelscope.analysis.facts import Facts, Options
from kernelscope.findings import Code, Finding, Severity
from kernelscope.protocol import ThreadUse, UnprofiledTiming
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
    per = "per call profiled (the median step)" if uneven is not None else "per call profiled"
    mixed = mixed_lines(facts)
    if mixed and facts.calls is not None and len(facts.calls.host_each) >= 3:
        profiled, per = statistics.median(facts.calls.host_each), "per call profiled (median)"
    ratio = profiled / host
    if ratio < 1.3:
        return
    caveat = (
        f"; the calls came from {mixed} lines whose costs differ, so the two medians may "
        "mix them differently: --from one line weighs like with like"
        if mixed
        else ""
    )
    yield Finding(
        Code.PROFILER_DISTORTION,
        Severity.INFO,
        f"the profiler inflates host time {ratio:.1f}×: {fmt(profiled)} {per} "
        f"vs {fmt(host)} unprofiled; small ops' CPU times here overstate their cost{caveat}",
        path=facts.function_path,
        line=facts.function_line,
        try_=[
            "trust the unprofiled per-call time for the cost; use the profile for where it goes",
            "threads waited for a CPU (KS605): the profiler's cost grows with the wait; "
            "compare with OMP_NUM_THREADS=1"
            if contention(facts) is not None
            else "--no-stack lowers the profiler's cost",
        ],
        evidence={"profiled_us": round(profiled, 1), "unprofiled_us": round(host, 1)},
    )


def mixed_lines(facts: Facts) -> int:
    """In place, how many lines of the program the timed calls came from where their
    medians differ by STEADY or more (0: one line, or alike): a GAN's discriminator ran
    29.7 ms from one line and 14.7-15.2 ms from two others."""
    site = facts.sidecar.call_site if facts.sidecar else None
    if site is None or len(site.sites) < 2:
        return 0
    medians = [s.median_us for s in site.sites]
    return len(medians) if max(medians) >= STEADY * min(medians) > 0 else 0


#: Medians of two lines' calls this far apart are different costs (the worker's STEADY).
STEADY = 1.15
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
    gpu = facts.verdict.gpu_us_per_step or 0.0
    if facts.verdict.bound != "overhead" and 0 < longest < gpu:
        # the GPU's work decides the step: a longer host side under it moves no figure (the
        # demo's 8192² matmul: one step's 328 µs of host against 1.5 ms of GPU a step)
        return
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
    step = side.call_site.step if side is not None and side.call_site is not None else "call"
    yield Finding(
        Code.UNSTEADY_TIMING,
        Severity.INFO,
        f"the unprofiled timing is unsteady: p10–p90 {fmt(t.p10_us)}–{fmt(t.p90_us)} around a "
        f"median of {fmt(t.us_per_call)} over {calls} {step}s ({spread:.0%} wide); differences "
        "between runs smaller than that are noise",
        path=facts.function_path,
        line=facts.function_line,
        try_=[
            "profile again; close other GPU and CPU work on this host",
            "host-bound code varies between processes: compare medians of several runs",
        ],
        evidence={"spread": round(spread, 3), "reps": calls},
    )


CONTENDED = 0.10  # of the timed time, a thread waited for a CPU


def contention(facts: Facts) -> tuple[ThreadUse, float, float] | None:
    """The thread that waited longest for a CPU while the calls were timed, its share of
    the timed time and that time (s), where the share is CONTENDED or more."""
    side = facts.sidecar
    t = side.timing if side else None
    if side is None or t is None or not t.threads:
        return None
    site = side.call_site
    if site is not None and not site.captured:
        window = in_place_timed_s(t)
    elif len(t.window_s) == 2 and t.window_s[1] > t.window_s[0]:
        window = t.window_s[1] - t.window_s[0]
    else:
        window = t.reps * t.us_per_call / 1e6
    if window <= 0:
        return None
    worst = max(t.threads, key=lambda x: x.wait_s)
    share = worst.wait_s / window
    return (worst, share, window) if share >= CONTENDED else None


def in_place_timed_s(t: UnprofiledTiming) -> float:
    """Seconds the program's timed steps took, those left out as settling too: in place the
    threads' waits are read over the steps alone, while its window also holds the program
    between them (dcgan's discriminator: 0.22 s of calls in a 1.55 s window, its threads
    waiting 0.056 s of them)."""
    kept = sum(t.samples_us) if len(t.samples_us) == t.reps else t.reps * t.us_per_call
    s = t.settling
    early = s.left_out * s.left_out_us if s is not None and s.left_out_us else 0.0
    return (kept + early) / 1e6


def find_cpu_contention(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS605: while the calls were timed, a thread of the process waited for a CPU (on a
    run queue: Linux schedstat) for CONTENDED of the time or more: other processes held the
    CPUs, or the process ran more threads than it had CPUs free. torch's intra-op threads wait for
    each other at every parallel op, so one kept waiting holds them all: on a 2-vCPU host
    busy with other work, a CPU training step read 58 ms unprofiled with 2 threads and
    20.6 ms with 1, and the profiler's cost 18.6x against 1.1x (transformers' Trainer)."""
    del options
    found = contention(facts)
    if found is None:
        return
    worst, share, window = found
    side = facts.sidecar
    assert side is not None
    waited = sum(x.wait_s for x in side.timing.threads)
    count = side.device_properties.get("threads")
    threads = count if isinstance(count, int) else 0
    intra = threads > 1
    try_ = (
        [
            f"torch runs {threads} intra-op threads here, and each parallel op waits for the "
            "slowest: OMP_NUM_THREADS=1 (or torch.set_num_threads(1)) times it steadily on "
            "a busy host; on a free one, as many threads as free CPUs"
        ]
        if intra
        else []
    )
    children = side.timing.children_cpu_s or 0.0
    among = (
        f", the program's own child processes (DataLoader workers) among them: they ran "
        f"{children:.2f} CPU s meanwhile"
        if children >= 0.1 * window
        else ""
    )
    yield Finding(
        Code.CPU_CONTENTION,
        Severity.WARNING,
        "threads waited for a CPU: while the calls were timed, "
        + ("the calling thread" if worst.timing else f"a thread of this process ({worst.name})")
        + f" waited {share:.0%} of the time ({waited:.2f} s of waits over {window:.2f} s, all "
        f"threads): other processes or threads held the CPUs{among}; the calls' times, "
        "profiled or not, hold those waits where the waiting threads did their work",
        path=facts.function_path,
        line=facts.function_line,
        try_=[
            *try_,
            *(
                [
                    "the program's own processes (DataLoader workers) compete for the same "
                    "CPUs: where they share them, fewer workers or threads leave each one a CPU"
                ]
                if among
                else []
            ),
            "close other CPU work on this host, or profile again when it is quiet",
        ],
        evidence={
            "wait_share": round(share, 3),
            "waited_s": round(waited, 3),
            "window_s": round(window, 3),
            "children_cpu_s": round(children, 3),
            "intra_op_threads": threads,
        },
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
