"""A user's Triton kernel on the H200 (fixtures/triton_softmax/: a row softmax over
16384 x 4096 fp32, recorded with the launch watch and measured by Nsight Compute): its row
gets the bytes of the tensors its launch was passed, agrees with the counters, and is not
mistaken for a CUDA-graph replay."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import msgspec
import pytest

from kernelscope.analysis.launches import apply_launches
from kernelscope.analysis.peaks import Peaks
from kernelscope.analysis.roofline import OpRoof, kind_of
from kernelscope.protocol import KernelLaunch, Sidecar
from kernelscope.report.build import replay_report
from kernelscope.report.schema import Report

from support import FIXTURES

FOLDER = FIXTURES / "triton_softmax"
IN_AND_OUT = 2 * 16384 * 4096 * 4


def rebuilt() -> Report:
    side = msgspec.json.decode((FOLDER / "sidecar.json").read_bytes(), type=Sidecar)
    return replay_report(
        FOLDER / "trace.json.gz",
        side,
        "row_softmax",
        str(FIXTURES / "workloads" / Path("custom_kernel.py")),
    )


def test_the_kernels_row_has_its_tensors_bytes_and_a_rate_under_the_roof() -> None:
    (row,) = rebuilt().roofline
    assert row.name == "softmax_rows" and row.kind == "custom" and row.estimate == "launch"
    assert row.bytes_per_step == IN_AND_OUT
    assert row.bound == "memory"
    assert row.efficiency is not None and 0.7 < row.efficiency <= 1.0
    assert row.flops_per_step is None  # FLOPs only from counters


def test_the_bytes_agree_with_nsight_computes_within_twenty_percent() -> None:
    measured = json.loads((FOLDER / "counters.json").read_text())
    (kernel,) = measured["counters"]["kernels"]
    dram = kernel["dram_read_bytes"] + kernel["dram_write_bytes"]
    (row,) = rebuilt().roofline
    assert row.bytes_per_step is not None
    assert abs(row.bytes_per_step / dram - 1) <= 0.20
    assert kernel["dram_read_bytes"] == pytest.approx(IN_AND_OUT / 2, rel=0.01)  # x, read once


def test_a_kernel_launched_outside_any_op_is_not_a_graph_replay() -> None:
    report = rebuilt()
    assert all(f.code != "KS702" for f in report.findings)
    memory_bound = next(f for f in report.findings if f.code == "KS102")
    assert not any("torch.compile" in t for t in memory_bound.try_)
    assert any("near the memory's peak" in t for t in memory_bound.try_)


def row(**kw: object) -> OpRoof:
    base: dict[str, object] = {
        "name": "k",
        "kind": "other",
        "bound": "unknown",
        "gpu_us_per_step": 100.0,
        "share": 1.0,
        "calls_per_step": 2.0,
        "kernels_per_step": 2.0,
        "mean_kernel_us": 50.0,
    }
    return OpRoof(**(base | kw))  # type: ignore[arg-type]


def test_bytes_scale_with_launches_and_a_rate_past_every_roof_is_not_rated() -> None:
    peaks = Peaks(
        name="H200",
        bf16_tflops=989.0,
        fp16_tflops=989.0,
        tf32_tflops=494.0,
        fp32_tflops=67.0,
        hbm_gbps=4800.0,
    )
    fits = row()
    apply_launches([fits], [KernelLaunch("k", 1, 100e6, 2)], peaks)
    assert fits.bytes_per_step == 200e6 and fits.achieved_gbps == pytest.approx(2000.0)
    assert fits.efficiency == pytest.approx(2000 / 4800)
    # 100 GB per launch in 100 µs: the kernel touched only part of its tensors
    past = row()
    apply_launches([past], [KernelLaunch("k", 1, 100e9, 2)], peaks)
    assert past.estimate == "launch" and past.efficiency is None
    other = row(name="aten::mm", kind="gemm")
    apply_launches([other], [KernelLaunch("k", 1, 100e6, 2)], peaks)
    assert other.bytes_per_step is None


def test_a_users_kernel_named_like_inductors_is_still_the_users() -> None:
    """A ``@triton.jit`` function the user named ``triton_rows`` reads as an Inductor kernel
    by its name alone; its launches say it is the user's: a ``custom`` row."""
    named = row(name="triton_rows", kind=kind_of("triton_rows"))
    assert named.kind == "elementwise"
    apply_launches([named], [KernelLaunch("triton_rows", 1, 100e6, 2)], None)
    assert named.kind == "custom" and named.estimate == "launch"


def test_a_users_slow_kernel_named_like_inductors_is_not_told_it_is_compiled(
    tmp_path: Path,
) -> None:
    """KS701's advice for a kernel Inductor generated (``triton_…``) is a library op, as it
    is compiled already; the user's own kernel of that name (a ``custom`` row) gets the
    advice for code not compiled (max-autotune). The fixture's kernel renamed
    ``triton_rows``, with a tenth of its tensors' bytes: far below its roof."""
    trace = tmp_path / "trace.json.gz"
    with gzip.open(FOLDER / "trace.json.gz", "rb") as f:
        trace.write_bytes(gzip.compress(f.read().replace(b'"softmax_rows"', b'"triton_rows"')))
    side = msgspec.json.decode((FOLDER / "sidecar.json").read_bytes(), type=Sidecar)
    side.launches = [KernelLaunch("triton_rows", 1, IN_AND_OUT / 10, 2)]
    report = replay_report(trace, side, "row_softmax", str(FOLDER / "custom_kernel.py"))
    (row,) = report.roofline
    assert row.name == "triton_rows" and row.kind == "custom"
    assert row.efficiency is not None and row.efficiency < 0.25
    slow = next(f for f in report.findings if f.code == "KS701")
    assert slow.try_ == [
        "try another shape or dtype, torch.compile(mode='max-autotune'), or a fused library op"
    ]
