"""KS601, the profiler's own cost (docs/findings.md#ks601): stated only as an inflation, never
as a negative overhead. On CPU_ONLY (tests/support/traces.py): two calls of 85 µs profiled."""

from __future__ import annotations

from kernelscope.analysis.diagnose import analyze
from kernelscope.analysis.trace_load import decode_trace
from kernelscope.findings import Code

from support.sidecars import cpu_sidecar
from support.traces import CPU_ONLY, dumps


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
