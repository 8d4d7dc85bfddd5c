"""The diagnosis on real workloads recorded on an H200 (fixtures/<name>/, recorded by
fixtures/record_real.py): kernelscope's own traces with their sidecars, and raw
torch.profiler traces of the same calls, against CUDA-event truth from a fresh process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kernelscope.analysis.diagnose import Analysis
from kernelscope.protocol import Sidecar

from support import FIXTURES
from support.recorded import analyzed

REAL = sorted(p.parent.name for p in FIXTURES.glob("*/raw.json.gz"))
#: Recorded on an H100 in a session lent no H200 (its meta.json says so).
ON_AN_H100 = {"bart_adamw", "llama_train", "efficientnet_train"}


def meta(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name / "meta.json").read_text())


def run(name: str, raw: bool = False) -> Analysis:
    """The analysis of the fixture's kernelscope trace with its sidecar, or of its raw trace
    alone (datasheet peaks, so the numbers do not depend on this machine's cache)."""
    return analyzed(name, raw)


def codes(a: Analysis) -> list[str]:
    return [f.code for f in a.findings]


def finding(a: Analysis, code: str) -> Any:
    return next(f for f in a.findings if f.code == code)


def test_the_suite_was_recorded_on_the_h200_with_its_truth() -> None:
    assert set(REAL) >= {
        "train_mlp",
        "vit_train",
        "cuda_graph",
        "sdpa_flash_train",
        "sdpa_cudnn",
        "resnet50",
        "gpt2_prefill",
        "gemm_misaligned",
        "h2d_pageable",
        "h2d_pinned",
        "collate",
        "fp8_gemm",
        "gemv",
        "host_bound",
        "compiled",
    }
    for name in REAL:
        m = meta(name)
        gpu = "NVIDIA H100 80GB HBM3" if name in ON_AN_H100 else "NVIDIA H200"
        assert m["gpu"] == gpu and m["cuda_events"]["reps"] == 50, name
        assert sum(f.stat().st_size for f in (FIXTURES / name).iterdir()) < 2_000_000, name


# Where the GPU is the bottleneck, a fresh process running the call back to back (no profiler,
# nothing profiled before) finishes one call per GPU time: the truth for GPU time per call.
GPU_BOUND = [
    "train_mlp",
    "cuda_graph",
    "sdpa_flash_train",
    "sdpa_cudnn",
    "resnet50",
    "gemm_misaligned",
    "h2d_pinned",
    "fp8_gemm",
    "gemv",
    "compiled",
]


def within_truth(name: str, measured: float) -> None:
    """Within 5 % of the truth; for a kernel whose own time varies more than that between
    runs (the fp8 GEMM, power-limited: 788-893 µs from the fastest call to p90 in the truth's
    own process), within 5 % of the truth's range from its fastest call to its p90."""
    truth = meta(name)["cuda_events"]
    if name in UNSTEADY_KERNELS:
        assert 0.95 * truth["min_us"] <= measured <= 1.05 * truth["p90_us"]
    else:
        assert measured == pytest.approx(truth["back_to_back_wall_us_per_call"], rel=0.05)


UNSTEADY_KERNELS = {"fp8_gemm"}


@pytest.mark.parametrize("name", GPU_BOUND)
def test_gpu_time_per_step_is_within_5_percent_of_cuda_events(name: str) -> None:
    within_truth(name, run(name).verdict.cuda_us_per_step)


# The raw traces' copies of pinned memory ran at 46 GB/s under the profiler (55 GB/s
# unprofiled in the same process): not the analysis's error, so h2d_pinned is left out.
@pytest.mark.parametrize("name", [n for n in GPU_BOUND if n != "h2d_pinned"])
def test_raw_trace_gpu_time_per_step_is_within_5_percent_of_cuda_events(name: str) -> None:
    within_truth(name, run(name, raw=True).verdict.cuda_us_per_step)


@pytest.mark.parametrize("name", ["host_bound", "collate", "vit_train", "gpt2_prefill"])
def test_where_the_gpu_idles_its_time_is_below_the_calls(name: str) -> None:
    truth = meta(name)["cuda_events"]["back_to_back_wall_us_per_call"]
    for a in (run(name), run(name, raw=True)):
        assert 0 < a.verdict.cuda_us_per_step < 0.95 * truth


VERDICTS: dict[str, tuple[str, str | None]] = {
    # name: (verdict of kernelscope's trace + sidecar, of the raw trace)
    "train_mlp": ("mixed", "mixed"),
    "cuda_graph": ("overhead", "overhead"),
    "sdpa_flash_train": ("compute", "compute"),
    "sdpa_cudnn": ("compute", "compute"),
    "resnet50": ("memory", "memory"),
    "gpt2_prefill": ("compute", "compute"),
    "gemm_misaligned": ("compute", "compute"),
    "h2d_pageable": ("transfer", "transfer"),
    "h2d_pinned": ("transfer", "transfer"),
    # busy 39 % of the profiling worker's timing, 46 % of the truth's: the host's stack of 64
    # images is what the call waits on. The raw trace's estimate (78 %) overstates the busy
    # share, and it reads transfer-bound: that verdict is not checked.
    "collate": ("overhead", None),
    "fp8_gemm": ("compute", "compute"),
    "gemv": ("memory", "memory"),
    "host_bound": ("overhead", "overhead"),
    "compiled": ("memory", "memory"),
}


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_verdicts_live_and_raw(name: str) -> None:
    live, raw = VERDICTS[name]
    assert run(name).verdict.bound == live, run(name).verdict.summary
    if raw is not None:
        assert run(name, raw=True).verdict.bound == raw, run(name, raw=True).verdict.summary


def test_backward_kernels_count_and_belong_to_the_backward_line() -> None:
    a = run("train_mlp")
    names = {r.name for r in a.roofline}
    assert {"aten::mm", "aten::addmm"} <= names  # the backward's GEMMs are mm, the forward's addmm
    # 4 layers: 4 forward addmm, 4 grad-input and 4 grad-weight mm (the first layer's
    # grad-input is not needed: 3) per step
    mm = sum(r.calls_per_step for r in a.roofline if r.name == "aten::mm")
    assert mm == 7


def test_raw_trace_profiler_step_cost_is_left_out() -> None:
    """A single 124 µs GEMV: the raw trace's steps hold p.step() and stack capture; the calls
    are the ops inside them, and the GPU is not called starved."""
    a = run("gemv", raw=True)
    assert a.calls_found_by == "profiler steps"
    assert a.verdict.bound == "memory"
    assert a.verdict.achieved_gbps is not None and a.verdict.achieved_gbps > 3500
    # over the steps' windows it read 59 %; over the calls and their GPU work, 64 %
    assert a.verdict.gpu_busy_fraction is not None and a.verdict.gpu_busy_fraction > 0.6


def test_raw_trace_busy_share_is_cross_checked_before_calling_overhead() -> None:
    a = run("train_mlp", raw=True)
    v = a.verdict
    assert v.gpu_busy_fraction is not None and v.gpu_busy_fraction < 0.5  # under the profiler
    assert v.bound != "overhead"
    assert v.busy_evidence is not None and "without it" in v.busy_evidence
    host = run("host_bound", raw=True).verdict
    assert host.bound == "overhead" and host.busy_evidence is not None


def test_a_cuda_graph_replay_is_counted_and_described() -> None:
    a = run("cuda_graph")
    replay = finding(a, "KS702")
    assert "200 kernels per replay" in replay.message
    assert replay.path is not None and replay.path.endswith("cuda_graph.py")
    # each kernel of the replay is a row of its own: 100 muls and 100 adds of 1 µs per step
    graph = [r for r in a.roofline if r.kind == "graph"]
    assert len(graph) == 2 and {r.kernels_per_step for r in graph} == {100}
    assert all(r.bound == "latency" and r.calls_per_step == 1 for r in graph)
    assert {"Mul", "add"} <= {w for r in graph for w in ("Mul", "add") if w in r.name}


def test_attention_flops_make_sdpa_compute_bound() -> None:
    cudnn = run("sdpa_cudnn").verdict
    assert cudnn.achieved_tflops is not None and 450 < cudnn.achieved_tflops < 700
    flash = run("sdpa_flash_train")
    kinds = {r.name: r for r in flash.roofline}
    assert kinds["aten::_flash_attention_backward"].bound == "compute"
    assert kinds["aten::_flash_attention_forward"].bound == "compute"


def test_fp8_is_measured_against_the_fp8_peak() -> None:
    v = run("fp8_gemm").verdict
    assert v.peak_tflops == 1979
    assert v.achieved_tflops is not None and 0.5 < v.achieved_tflops / v.peak_tflops < 1.0


def test_a_cnn_shows_its_split() -> None:
    v = run("resnet50").verdict
    shares = {b.bound: b.share for b in v.breakdown}
    assert shares["memory"] > 0.5 and shares["compute"] > 0.1
    assert "memory-bound at" in v.summary and "compute-bound at" in v.summary


@pytest.mark.parametrize("name", ["gpt2_prefill", "gemm_misaligned"])
def test_a_misaligned_gemm_is_named_with_its_cause(name: str) -> None:
    slow = finding(run(name), "KS701")
    assert "50257 is not a multiple of 8" in slow.message
    assert slow.evidence["efficiency"] < 0.2
    assert slow.path is not None and Path(slow.path).name in ("transformer.py", "gemm.py")
    if name == "gpt2_prefill":
        assert slow.evidence["share"] > 0.4  # half the prefill's GPU time


def test_pageable_and_pinned_copies_against_the_link() -> None:
    pageable = run("h2d_pageable").verdict
    pinned = run("h2d_pinned").verdict
    assert "Pageable" in pageable.summary and "PCIe 5.0 x16" in pageable.summary
    assert "Pinned" in pinned.summary
    pin = "pin the host memory"
    assert any(pin in t for t in finding(run("h2d_pageable"), "KS105").try_)
    assert not any(pin in t for t in finding(run("h2d_pinned"), "KS105").try_)


def test_compiled_code_breaks_out_compile_time_and_reports_no_generated_lines() -> None:
    a = run("compiled")
    cold = finding(a, "KS201")
    assert "torch.compile compiled for" in cold.message
    side = msgspec.json.decode((FIXTURES / "compiled" / "sidecar.json").read_bytes(), type=Sidecar)
    assert side.cold.compile_us is not None and side.cold.compile_us > 100_000
    assert all("torchinductor" not in line.path for line in side.lines)
    for f in a.findings:
        assert f.path is None or "torchinductor" not in f.path


@pytest.mark.parametrize(
    ("name", "line", "share"),
    [
        ("train_mlp", 24, 0.4),  # loss.backward()
        ("sdpa_flash_train", 11, 0.7),  # out.backward(grad)
        ("vit_train", 11, 0.6),  # loss.backward()
        ("cuda_graph", 7, 0.95),  # graph.replay()
    ],
)
def test_the_line_pass_gives_backward_and_replays_to_their_lines(
    name: str, line: int, share: float
) -> None:
    side = msgspec.json.decode((FIXTURES / name / "sidecar.json").read_bytes(), type=Sidecar)
    cuda = next(s.cuda_us for s in side.lines if s.line == line)
    total = meta_cuda(name)
    assert cuda > share * total


def meta_cuda(name: str) -> float:
    """The CUDA time per step of the recorded report."""
    return json.loads((FIXTURES / name / "report.json").read_text())["timing"]["cuda_us_per_step"]


def test_fused_attention_is_suggested_only_where_attention_is_not_fused() -> None:
    fused = "use fused attention"
    for name in ("gpt2_prefill", "sdpa_cudnn"):  # both already run cuDNN's fused kernel
        for f in run(name).findings:
            assert not any(fused in t for t in f.try_), (name, f.code)
