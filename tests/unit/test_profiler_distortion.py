"""KS601, the profiler's own cost (docs/findings.md#ks601): stated only as an inflation, never
as a negative overhead. On CPU_ONLY (tests/support/traces.py): two calls of 85 µs profiled."""

from __future__ import annotations

import msgspec

from kernelscope.analysis.diagnose import analyze
from kernelscope.analysis.trace_load import decode_trace
from kernelscope.findings import Code, Finding
from kernelscope.protocol import CallSite, StepSite, ThreadUse

from support.recorded import analyzed
from support.sidecars import cpu_sidecar
from support.traces import CPU_ONLY, MM, doc, dumps, op, step


def distortion(us_per_call: float, host_us_per_call: float | None = None) -> list[str]:
    side = cpu_sidecar(us_per_call=us_per_call)
    side.timing.host_us_per_call = host_us_per_call
    a = analyze(decode_trace(dumps(CPU_ONLY)), side)
    return [f.message for f in a.findings if f.code == Code.PROFILER_DISTORTION]


def test_the_profilers_cost_is_an_inflation_of_at_least_1_3() -> None:
    assert distortion(50.0) == [
        "the profiler inflates host time 1.7×: 85.0 µs per call profiled vs 50.0 µs "
        "unprofiled; small ops' CPU times here overstate their cost"
    ]
    assert distortion(66.0) == []  # 1.29×: within what two timings differ by


def test_a_profiled_call_faster_than_the_unprofiled_one_states_no_overhead() -> None:
    """85 µs profiled against 140 µs unprofiled (the two timings' noise, or a clean worker
    that warmed up less): no finding, so no "-39 %" overhead anywhere in the analysis."""
    assert distortion(140.0) == []


def test_on_the_cpu_it_weighs_the_median_the_report_shows() -> None:
    """The host's time per call is the calls' mean; the unprofiled line shows their median
    (time_sequence_prediction: 561 ms beside 546 ms): the finding names the same figure."""
    assert distortion(50.0, host_us_per_call=60.0) == distortion(50.0)


# Four profiled steps of one matmul each, the third ten times the others' (a periodic eval
# among the steps): host times 60, 60, 600, 60 µs, so 195 µs a step on average.
UNEVEN = doc(
    step(1, 0.0, 100.0),
    op("aten::mm", 5.0, 60.0, 2, *MM),
    step(2, 100.0, 100.0),
    op("aten::mm", 105.0, 60.0, 3, *MM),
    step(3, 200.0, 1000.0),
    op("aten::mm", 205.0, 600.0, 4, *MM),
    step(4, 1200.0, 100.0),
    op("aten::mm", 1205.0, 60.0, 5, *MM),
)


def findings(document: dict[str, object], us_per_call: float, code: Code) -> list[str]:
    a = analyze(decode_trace(dumps(document)), cpu_sidecar(us_per_call=us_per_call))
    return [f.message for f in a.findings if f.code == code]


def test_a_step_several_times_the_others_is_named_and_not_the_profilers_cost() -> None:
    """KS602 names it; KS601 weighs the median step (60 µs against 50 unprofiled: 1.2×, no
    finding), where the mean (195 µs) would read a 3.9× distortion that the eval made."""
    assert findings(UNEVEN, 50.0, Code.UNEVEN_STEPS) == [
        "the profiled calls are uneven: call 3 of 4 took 600.0 µs of host time, 10.0× the "
        "median 60.0 µs; the per-step figures average it in"
    ]
    assert findings(UNEVEN, 50.0, Code.PROFILER_DISTORTION) == []
    assert findings(UNEVEN, 40.0, Code.PROFILER_DISTORTION) == [
        "the profiler inflates host time 1.5×: 60.0 µs per call profiled (the median step) "
        "vs 40.0 µs unprofiled; small ops' CPU times here overstate their cost"
    ]


#: Five calls from two lines of the program: 300 µs from one, 150 from the other.
MIXED = doc(
    *(
        e
        for i, (ts, dur) in enumerate([(0, 300), (300, 150), (450, 150), (600, 300), (900, 150)])
        for e in (step(i + 1, float(ts), float(dur)), op("aten::mm", ts + 5.0, dur - 10.0, 2, *MM))
    )
)


def test_calls_from_lines_of_different_costs_weigh_the_median_and_say_so() -> None:
    """The five profiled calls' CPU time per step (200 µs) against an unprofiled median of
    150 would read 1.3x; their median call's ops, 140 µs, read none. Where the median is
    still 1.3x over, the message says the calls came from two lines, and how to weigh like
    with like."""
    side = cpu_sidecar(us_per_call=150.0)
    plain = [f for f in analyze(decode_trace(dumps(MIXED)), side).findings
             if f.code == Code.PROFILER_DISTORTION]  # fmt: skip
    assert [f.message.split(":")[0] for f in plain] == ["the profiler inflates host time 1.3×"]
    side.call_site = CallSite(
        "gan.py", 30, captured=False,
        sites=[StepSite("gan.py", 30, 7, 300.0), StepSite("gan.py", 40, 14, 150.0)],
    )  # fmt: skip
    found = analyze(decode_trace(dumps(MIXED)), side).findings
    assert not [f for f in found if f.code == Code.PROFILER_DISTORTION]
    side.timing.us_per_call = 100.0
    (mixed,) = [f for f in analyze(decode_trace(dumps(MIXED)), side).findings
                if f.code == Code.PROFILER_DISTORTION]  # fmt: skip
    assert mixed.message == (
        "the profiler inflates host time 1.4×: 140.0 µs per call profiled (median) vs 100.0 µs "
        "unprofiled; small ops' CPU times here overstate their cost; the calls came from 2 "
        "lines whose costs differ, so the two medians may mix them differently: --from one "
        "line weighs like with like"
    ), mixed.message


def test_steps_alike_or_too_few_to_tell_are_not_uneven() -> None:
    assert findings(CPU_ONLY, 50.0, Code.UNEVEN_STEPS) == []  # two steps
    even = doc(*(e for e in UNEVEN["traceEvents"] if e.get("ts") != 205.0),  # type: ignore[union-attr]
               op("aten::mm", 205.0, 170.0, 4, *MM))  # fmt: skip
    assert findings(even, 50.0, Code.UNEVEN_STEPS) == []  # 170 µs: 2.8× the median


def contention(
    waits: list[float], threads: int = 2, children_cpu_s: float | None = None
) -> list[Finding]:
    """Four calls of 85 µs unprofiled timed over 1 s, each thread having waited `waits` s
    for a CPU (the calling thread first)."""
    side = cpu_sidecar(us_per_call=85.0)
    side.timing.window_s = [100.0, 101.0]
    side.timing.threads = [
        ThreadUse("python", 0, 0.5, timing=i == 0, wait_s=w) for i, w in enumerate(waits)
    ]
    side.device_properties["threads"] = threads
    side.timing.children_cpu_s = children_cpu_s
    return [f for f in analyze(decode_trace(dumps(CPU_ONLY)), side).findings
            if f.code in (Code.CPU_CONTENTION, Code.PROFILER_DISTORTION)]  # fmt: skip


def test_threads_that_waited_for_a_cpu_name_a_busy_host_and_the_intra_op_threads() -> None:
    """A thread that waited 10 % of the timed second or more: the host was busy (on a
    2-vCPU host with other work, transformers' Trainer step read 58 ms unprofiled with 2
    intra-op threads, 20.6 ms with 1); under that, no finding."""
    (busy,) = contention([0.05, 0.4])
    assert busy.code == Code.CPU_CONTENTION and busy.severity == "warning"
    assert busy.message == (
        "threads waited for a CPU: while the calls were timed, a thread of this process "
        "(python) waited 40% of the time (0.45 s of waits over 1.00 s, all threads): other "
        "processes or threads held the CPUs; the calls' times, profiled or not, hold those "
        "waits where the waiting threads did their work"
    )
    assert busy.try_[0].startswith("torch runs 2 intra-op threads here")
    (alone,) = contention([0.2], threads=1)
    assert "the calling thread waited 20% of the time" in alone.message
    # the program's own DataLoader workers ran 0.8 CPU s of the second beside it
    (own,) = contention([0.05, 0.4], children_cpu_s=0.8)
    assert (
        "held the CPUs, the program's own child processes (DataLoader workers) among them: "
        "they ran 0.80 CPU s meanwhile;" in own.message
    )
    assert own.try_[1].startswith("the program's own processes (DataLoader workers) compete")
    assert alone.try_ == ["close other CPU work on this host, or profile again when it is quiet"]
    assert contention([0.05, 0.09]) == []


def test_in_place_the_waits_are_weighed_against_the_timed_steps_not_their_window() -> None:
    """In place the threads' waits are read inside the timed steps, while the window also
    holds the program between them: dcgan's discriminator in place took 0.222 s of calls
    in a 1.554 s window, its threads waiting 0.056 s of them (25 %, not 3.6 %)."""
    side = cpu_sidecar(us_per_call=55_500.0)
    side.call_site = CallSite("main.py", 234, modes=["calls 6-14 profiled"], captured=False)
    side.timing.reps = 4
    side.timing.samples_us = [52_000.0, 54_000.0, 57_000.0, 59_000.0]
    side.timing.window_s = [100.0, 101.554]
    side.timing.threads = [ThreadUse("python", 0, 0.2, timing=True, wait_s=0.056)]
    side.device_properties["threads"] = 1
    found = [f for f in analyze(decode_trace(dumps(CPU_ONLY)), side).findings
             if f.code == Code.CPU_CONTENTION]  # fmt: skip
    assert len(found) == 1, found
    assert "waited 25% of the time (0.06 s of waits over 0.22 s" in found[0].message, found
    # captured, the same waits over the same window are 3.6 %: no finding
    side.call_site = msgspec.structs.replace(side.call_site, captured=True)
    assert not [f for f in analyze(decode_trace(dumps(CPU_ONLY)), side).findings
                if f.code == Code.CPU_CONTENTION]  # fmt: skip


def test_with_threads_waiting_the_profilers_cost_points_at_them() -> None:
    side = cpu_sidecar(us_per_call=50.0)  # 85 µs profiled: KS601 at 1.7x
    side.timing.window_s = [100.0, 101.0]
    side.timing.threads = [ThreadUse("python", 0, 0.5, timing=True, wait_s=0.3)]
    found = analyze(decode_trace(dumps(CPU_ONLY)), side).findings
    (distortion,) = [f for f in found if f.code == Code.PROFILER_DISTORTION]
    assert distortion.try_[1].startswith("threads waited for a CPU (KS605)")
    side.timing.threads = []
    (plain,) = [f for f in analyze(decode_trace(dumps(CPU_ONLY)), side).findings
                if f.code == Code.PROFILER_DISTORTION]  # fmt: skip
    assert plain.try_[1] == "--no-stack lowers the profiler's cost"


def test_a_longer_host_side_under_the_gpus_work_is_not_an_uneven_step() -> None:
    """The recorded H200 steps whose first profiled step had 3-4x the host time of the
    others, all of it under the GPU's work (an 8192² matmul: 328 µs of host against 1.45 ms
    of GPU a step; a misaligned GEMM; pinned copies): the GPU decides each step, so no
    figure averages the longer host side in, and KS602 says nothing."""
    for name in ("matmul_add_8192", "gemm_misaligned", "h2d_pinned"):
        a = analyzed(name, False)
        assert a.verdict.bound != "overhead" and (a.verdict.gpu_us_per_step or 0) > 0
        assert [f for f in a.findings if f.code == Code.UNEVEN_STEPS] == [], name


def test_an_unsteady_timing_counts_its_steps_by_their_name() -> None:
    """KS603: p10-p90 over 20 % of the median; in place over a loop, iterations."""
    from kernelscope.protocol import CallSite

    side = cpu_sidecar(us_per_call=100.0)
    side.timing.p10_us, side.timing.p90_us = 80.0, 130.0

    def unsteady() -> list[Finding]:
        found = analyze(decode_trace(dumps(CPU_ONLY)), side).findings
        return [f for f in found if f.code == Code.UNSTEADY_TIMING]

    (calls,) = unsteady()
    assert calls.message.startswith(
        "the unprofiled timing is unsteady: p10–p90 80.0 µs–130.0 µs around a median of "
        "100.0 µs over 100 calls (50% wide)"
    )
    side.call_site = CallSite(via="train.py", call=1, captured=False, step="iteration")
    (iterations,) = unsteady()
    assert "over 100 iterations (50% wide)" in iterations.message
    side.timing.p10_us, side.timing.p90_us = 95.0, 110.0  # 15 % wide
    assert unsteady() == []
