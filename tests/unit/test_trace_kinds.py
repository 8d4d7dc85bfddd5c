"""`analyze` on every kind of trace: no steps, CPU only, several streams or GPUs, ROCm, driver
launches. Each trace is a small hand-built Kineto document whose numbers are worked out by
hand in the comments; the analysis must find exactly them. (`kernelscope analyze` on them:
tests/integration/test_cli_analyze.py.)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kernelscope.analysis.diagnose import Analysis, analyze
from kernelscope.analysis.facts import first_kernel_delay
from kernelscope.analysis.timeline import build_timeline
from kernelscope.analysis.trace_load import load_trace
from kernelscope.analysis.trace_model import Trace
from kernelscope.findings import Finding
from kernelscope.report.build import analyze_trace
from kernelscope.report.schema import TraceAnalysis

from support.sidecars import cpu_sidecar
from support.traces import (
    ANNOTATED,
    BF16,
    CPU_ONLY,
    F32,
    MM_BYTES,
    MM_FLOPS,
    ROCM,
    TWO_STREAMS,
    doc,
    gpu,
    launch,
    op,
    span,
    step,
    write,
)

# -- helpers ---------------------------------------------------------------------------------------


def code(analysis: Analysis | TraceAnalysis, name: str) -> Finding:
    hits = [f for f in analysis.findings if f.code == name]
    assert len(hits) == 1, [f.code for f in analysis.findings]
    return hits[0]


def codes(analysis: Analysis | TraceAnalysis) -> list[str]:
    return [f.code for f in analysis.findings]


@pytest.fixture(autouse=True)
def no_calibrated_peaks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Peaks come from the datasheet table, not from this machine's `calibrate` cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    yield


def load(tmp_path: Path, document: dict[str, Any], compress: bool = False) -> tuple[Path, Trace]:
    path = write(tmp_path / ("t.json.gz" if compress else "t.json"), document, compress)
    return path, load_trace(path)


def both(tmp_path: Path, document: dict[str, Any], compress: bool = False) -> tuple[
    Trace, Analysis, TraceAnalysis
]:  # fmt: skip
    """The trace, its analysis, and the `analyze` report (which must agree on the verdict)."""
    path, trace = load(tmp_path, document, compress)
    analysis = analyze(trace)
    report = analyze_trace(path, trace)
    assert report.verdict == analysis.verdict
    assert codes(report) == codes(analysis)
    assert report.dead_window == {"entry_to_first_kernel_us": analysis.entry_to_first_kernel_us}
    assert report.warnings == analysis.warnings == trace.warnings == []
    msgspec.json.encode(report)  # everything serializes
    return trace, analysis, report


def row(report: TraceAnalysis, name: str) -> tuple[int, float]:
    r = next(r for r in report.ops if r.name == name)
    return r.calls, r.self_cuda_us


# -- (a) no ProfilerStep ---------------------------------------------------------------------------

# ANNOTATED (support/traces.py, with its numbers worked out): two top-level ranges, no step.


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_top_level_annotations_stand_in_for_steps(tmp_path: Path, compress: bool) -> None:
    trace, a, report = both(tmp_path, ANNOTATED, compress)
    assert [s.name for s in trace.steps] == ["fwd", "bwd"]
    assert a.steps == report.steps == 2
    v = a.verdict
    assert v.bound == "overhead"
    assert v.gpu_busy_fraction == pytest.approx(40 / 200)
    assert v.gpu_us_per_step == pytest.approx(20.0)
    assert v.wall_us_per_step == pytest.approx(100.0)
    assert v.kernels_per_step == 2 / 2
    assert v.mean_kernel_us == pytest.approx(20.0)
    assert v.mean_launch_us == pytest.approx(5.0)
    assert v.median_queue_us == pytest.approx(10.0)  # launch at 20, kernel at 30
    # FLOPs from Input Dims (no sidecar): 524,288 per step over 20 µs of GPU per step.
    assert v.flops_per_step == pytest.approx(MM_FLOPS)
    assert v.bytes_per_step == pytest.approx(MM_BYTES)
    assert v.achieved_tflops == pytest.approx(MM_FLOPS / 20.0 / 1e6)
    assert v.achieved_gbps == pytest.approx(MM_BYTES / 20.0 / 1e3)
    assert v.matmul_dtype == F32
    assert v.device is None and v.peak_tflops is None  # no deviceProperties
    assert a.entry_to_first_kernel_us == pytest.approx(30.0)  # fwd starts at 0, kernel at 30
    assert first_kernel_delay(trace) == pytest.approx(30.0)
    assert code(a, "KS101").evidence["gpu_busy_fraction"] == round(40 / 200, 4)
    assert row(report, "aten::mm") == (2, 40.0)


# No annotation at all: one step spans the CPU ops, [0, 10]; the kernel launched inside it
# runs 8 → 1008, so the window is [0, 1008] with 1000 µs busy. A 4096³ bf16 matmul:
# 2·4096³ FLOPs over 3·4096²·2 bytes is 1365 FLOP/B, above the default ridge (200) → compute.
BARE = doc(
    op("aten::mm", 0.0, 10.0, 1, ([4096, 4096], BF16), ([4096, 4096], BF16)),
    launch("cudaLaunchKernel", 2.0, 5.0, 11),
    gpu("gemm", 8.0, 1000.0, 11, ext=1),
)


def test_no_annotations_one_window_over_the_cpu_ops(tmp_path: Path) -> None:
    trace, a, report = both(tmp_path, BARE)
    assert [(s.name, s.ts, s.dur) for s in trace.steps] == [("all", 0.0, 10.0)]
    v = a.verdict
    flops, moved = 2 * 4096**3, 3 * 4096 * 4096 * 2
    assert v.bound == "compute"
    assert v.gpu_busy_fraction == pytest.approx(1000 / 1008)
    assert v.wall_us_per_step == pytest.approx(1008.0)
    assert v.arithmetic_intensity == pytest.approx(flops / moved)
    assert v.ridge_point is None  # no device: the default ridge
    assert v.achieved_tflops == pytest.approx(flops / 1000 / 1e6)
    assert v.matmul_dtype == BF16
    assert a.entry_to_first_kernel_us == pytest.approx(8.0)
    assert codes(a) == ["KS103"]
    assert report.steps == 1


def test_no_host_ops_at_all_uses_the_gpu_span(tmp_path: Path) -> None:
    # Only GPU work and its launches: no step; the window is [launch, last kernel end].
    document = doc(
        launch("cudaLaunchKernel", 0.0, 5.0, 11),
        gpu("k1", 10.0, 30.0, 11),
        launch("cudaLaunchKernel", 6.0, 5.0, 12),
        gpu("k2", 60.0, 40.0, 12),
    )
    trace, a, _ = both(tmp_path, document)
    assert trace.steps == []
    assert a.steps == 1
    tl = build_timeline(trace)
    assert tl.window == (0.0, 100.0)
    assert tl.busy_us == pytest.approx(70.0)
    assert a.verdict.bound == "memory"  # busy 70 %, no shapes
    assert "intensity unknown" in a.verdict.summary
    assert a.entry_to_first_kernel_us == pytest.approx(10.0)  # from the first launch
    assert [(g.start, g.end) for g in tl.gaps] == [(40.0, 60.0)]


# -- (b) CPU only ----------------------------------------------------------------------------------

# CPU_ONLY (support/traces.py, with its numbers worked out): two steps of CPU work only.


def test_cpu_only_trace_is_host_bound(tmp_path: Path) -> None:
    trace, a, report = both(tmp_path, CPU_ONLY, compress=True)
    assert trace.gpu_events == []
    v = a.verdict
    assert v.bound == "host"
    assert v.summary == (
        "host-bound: no GPU work; 85.0 µs of CPU per step; "
        "the ops' CPU time: matmuls 75%, other ops 25%"
    )
    # a profile's verdict leads with the unprofiled figure: the profiler's CPU time per step
    # ran 2.1x it on pytorch/examples' VAE loop (17.2 against 8.3 ms)
    profiled = analyze(trace, sidecar=cpu_sidecar(us_per_call=40.0)).verdict
    assert profiled.summary.startswith(
        "host-bound: no GPU work; 40.0 µs per step unprofiled (85.0 µs of CPU profiled); "
    )
    assert v.gpu_busy_fraction is None
    assert v.kernels_per_step == 0
    assert v.achieved_tflops is None and v.achieved_gbps is None
    assert a.entry_to_first_kernel_us is None
    assert codes(a) == ["KS104"]
    assert report.device is None
    assert row(report, "aten::mm") == (2, 0.0)
    assert "ProfilerStep*" not in {r.name for r in report.ops}  # the profiler's, not the call's


# -- (c) two streams -------------------------------------------------------------------------------

# TWO_STREAMS (support/traces.py, with its numbers worked out): kernels on two streams overlap.


def test_overlapping_streams_count_their_union(tmp_path: Path) -> None:
    trace, a, _ = both(tmp_path, TWO_STREAMS)
    tl = build_timeline(trace)
    assert tl.busy_us == pytest.approx(60.0)
    assert tl.kernel_us == pytest.approx(80.0)
    assert (tl.streams, tl.devices, tl.kernels) == (2, 1, 2)
    assert tl.gaps == []
    v = a.verdict
    assert v.bound == "memory"
    assert v.gpu_busy_fraction == pytest.approx(60 / 90)
    assert v.gpu_us_per_step == pytest.approx(60.0)
    assert v.mean_kernel_us == pytest.approx(40.0)
    evidence = code(a, "KS102").evidence
    assert evidence["gpu_busy_fraction"] == round(60 / 90, 4)
    assert evidence["gpu_us_per_step"] == 60.0
    assert evidence["kernels_per_step"] == 2.0
    sync = code(a, "KS301")
    assert (sync.path, sync.line) == ("train.py", 12)
    assert "1 per step (cudaStreamSynchronize)" in sync.message
    assert sync.evidence == {"wait_us": 10.0}
    assert a.entry_to_first_kernel_us == pytest.approx(20.0)


# -- (d) two GPUs ----------------------------------------------------------------------------------

# One 200 µs step launching a 1024³ bf16 matmul on each of two H100s: device 0 busy [50, 150],
# device 1 [60, 160]; 110 µs busy in the union, over the call's [10, 160] (its ops, then
# its GPU tail). 2·2·1024³ FLOPs over 2·3·1024²·2 bytes
# = 341 FLOP/B, above the H100's ridge (989 TFLOP/s ÷ 3.35 TB/s = 295) → compute.
GEMM_1K = ([1024, 1024], BF16), ([1024, 1024], BF16)
H100 = {"name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85_045_510_144, "numSms": 132}
TWO_GPUS = doc(
    step(1, 0.0, 200.0),
    op("aten::mm", 10.0, 20.0, 2, *GEMM_1K),
    launch("cudaLaunchKernel", 12.0, 5.0, 31),
    gpu("gemm", 50.0, 100.0, 31, ext=2, device=0),
    op("aten::mm", 40.0, 20.0, 3, *GEMM_1K),
    launch("cudaLaunchKernel", 42.0, 5.0, 32),
    gpu("gemm", 60.0, 100.0, 32, ext=3, device=1),
    deviceProperties=[{"id": 0, **H100}, {"id": 1, **H100}],
)


def test_two_gpus(tmp_path: Path) -> None:
    trace, a, report = both(tmp_path, TWO_GPUS)
    tl = build_timeline(trace)
    assert (tl.devices, tl.streams) == (2, 2)
    assert tl.busy_us == pytest.approx(110.0)
    v = a.verdict
    flops, moved = 2 * 2 * 1024**3, 2 * 3 * 1024 * 1024 * 2
    assert v.bound == "compute"
    assert v.device == report.device == "NVIDIA H100 80GB HBM3"
    assert v.gpu_busy_fraction == pytest.approx(110 / 150)
    assert v.flops_per_step == pytest.approx(flops)
    assert v.arithmetic_intensity == pytest.approx(flops / moved)
    assert (v.peak_tflops, v.peak_gbps, v.peaks_source) == (989, 3350, "datasheet")
    assert v.ridge_point == pytest.approx(989e12 / 3350e9)
    assert v.achieved_tflops == pytest.approx(flops / 110 / 1e6)
    assert a.entry_to_first_kernel_us == pytest.approx(50.0)
    # the GPU idles [10, 50] while the host launches; a 1024³ GEMM in 100 µs is 2 % of peak
    assert codes(a) == ["KS103", "KS401", "KS701"]
    assert row(report, "aten::mm") == (2, 200.0)


# -- (e) ROCm --------------------------------------------------------------------------------------

# ROCM (support/traces.py, with its numbers worked out): an MI300X step, hip launches.


def test_rocm_trace_finds_the_mi300x_datasheet(tmp_path: Path) -> None:
    trace, a, report = both(tmp_path, ROCM, compress=True)
    assert [trace.ops[g.launch].name for g in trace.gpu_events] == [
        "hipExtModuleLaunchKernel",
        "hipLaunchKernel",
    ]
    assert [trace.ops[g.op].name for g in trace.gpu_events] == ["aten::mm", "aten::add"]
    v = a.verdict
    flops, moved = 2 * 8192**3, 2 * 3 * 8192 * 8192 * 2
    assert v.device == "AMD Instinct MI300X"
    assert (v.peak_tflops, v.peak_gbps, v.peaks_source) == (1307, 5300, "datasheet")
    assert v.bound == "compute"
    assert v.gpu_busy_fraction == pytest.approx(2100 / 2180)
    assert v.arithmetic_intensity == pytest.approx(flops / moved)
    assert v.ridge_point == pytest.approx(1307e12 / 5300e9)
    assert v.achieved_tflops == pytest.approx(flops / 2100 / 1e6)
    assert v.mean_launch_us == pytest.approx(7.5)  # the two launches, not the sync
    assert v.kernels_per_step == 2
    assert a.entry_to_first_kernel_us == pytest.approx(40.0)
    sync = code(a, "KS301")
    assert "hipStreamSynchronize" in sync.message and sync.evidence == {"wait_us": 40.0}
    assert row(report, "aten::mm") == (1, 2000.0)
    assert row(report, "aten::add") == (1, 100.0)


# -- (f) driver launches and an elementwise chain --------------------------------------------------

# One 100 µs step; aten::mul then aten::add, each launched by cuLaunchKernelEx (cuda_driver):
# kernels [20, 50] and [50, 80]; the call is [10, 80] (its ops, then its GPU tail) → busy 60
# of 70, no FLOPs → memory-bound. Each moves two 4 MiB
# fp32 reads and one write: 24 MiB per step over 60 µs of GPU.
X = [1024, 1024]
DRIVER = doc(
    step(1, 0.0, 100.0),
    op("aten::mul", 10.0, 10.0, 2, (X, F32), (X, F32)),
    launch("cuLaunchKernelEx", 12.0, 4.0, 41, cat="cuda_driver"),
    gpu("vectorized_elementwise_kernel<mul>", 20.0, 30.0, 41, ext=2),
    op("aten::add", 25.0, 10.0, 3, (X, F32), (X, F32), ([], "Scalar")),
    launch("cuLaunchKernelEx", 27.0, 4.0, 42, cat="cuda_driver"),
    gpu("vectorized_elementwise_kernel<add>", 50.0, 30.0, 42, ext=3),
    deviceProperties=[{"id": 0, "name": "NVIDIA H200", "totalGlobalMem": 150_109_880_320}],
)


def test_driver_launches_and_an_elementwise_chain(tmp_path: Path) -> None:
    trace, a, _ = both(tmp_path, DRIVER)
    assert {trace.ops[g.launch].cat for g in trace.gpu_events} == {"cuda_driver"}
    v = a.verdict
    moved = 2 * 3 * 1024 * 1024 * 4
    assert v.bound == "memory"
    assert v.gpu_busy_fraction == pytest.approx(60 / 70)
    assert v.flops_per_step is None and v.achieved_tflops is None
    assert v.bytes_per_step == pytest.approx(moved)
    assert v.achieved_gbps == pytest.approx(moved / 60 / 1e3)
    assert v.peak_gbps == 4800 and v.device == "NVIDIA H200"
    assert v.mean_launch_us == pytest.approx(4.0)
    assert v.median_queue_us == pytest.approx((8 + 23) / 2)
    assert a.entry_to_first_kernel_us == pytest.approx(20.0)
    chain = code(a, "KS501")
    assert chain.severity == "warning"  # memory-bound: fusing is the fix
    assert chain.evidence == {"kernels_per_step": 2.0, "gpu_us_per_step": 60.0, "gpu_share": 1.0}
    assert "aten::mul ×1" in chain.message and "aten::add ×1" in chain.message
    assert "24.0 MiB per step" in chain.message
    assert codes(a) == ["KS102", "KS501", "KS701", "KS701"]  # 0.4 TB/s: 8 % of the HBM's


def test_a_single_elementwise_kernel_is_no_chain(tmp_path: Path) -> None:
    single = doc(*[e for e in DRIVER["traceEvents"] if e.get("args", {}).get("correlation") != 42])
    single["traceEvents"] = [
        e for e in single["traceEvents"] if e["name"] != "aten::add"
    ]  # the add and its launch and kernel gone
    _, a, _ = both(tmp_path, single)
    assert "KS501" not in codes(a)


# -- a large trace ---------------------------------------------------------------------------------


def test_a_large_trace_is_analyzed_in_linear_time(tmp_path: Path) -> None:
    """10 000 steps' worth of launches, each kernel followed by a 40 µs gap, a sync every 5th,
    all inside Python frames: the gap and sync analyses must not compare every gap with
    every op, nor every sync with every frame (quadratic: minutes here)."""
    n = 10_000
    events = [step(1, 0.0, n * 100.0 + 100)]
    for i in range(n):
        t = i * 100.0
        events += [
            span("python_function", f"train.py({i % 50 + 1}): f", t, 90.0),
            op("aten::mul", t + 1, 20.0, i + 10),
            launch("cudaLaunchKernel", t + 2, 5.0, i + 10),
            gpu("k", t + 10, 50.0, i + 10, ext=i + 10),
        ]
        if i % 5 == 0:
            events.append(launch("cudaStreamSynchronize", t + 30, 10.0, 10**7 + i))
    _, trace = load(tmp_path, doc(*events))
    started = time.perf_counter()
    a = analyze(trace)
    assert time.perf_counter() - started < 10.0
    tl = build_timeline(trace)
    assert len(tl.gaps) == n - 1 and tl.gaps[0].cpu_ops == ("aten::mul",)
    assert {f.line for f in a.findings if f.code == "KS301"} == set(range(1, 51, 5))
    assert code(a, "KS401").evidence["gaps"] == n - 1
