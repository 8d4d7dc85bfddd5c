"""cuDNN's two-pass batch norm kernels and max pooling's backward against Nsight Compute, on a
ResNet-18 training step measured on the H200 (fixtures/resnet18_sgd: issue 24, item 3): each
row's inputs rebuilt from the shapes its --counters report recorded, in the argument layout
ATen gives these ops, and the whole roofline over the same step's live and raw traces."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kernelscope.analysis.costs.batch_norm import batch_norm_reread_bytes
from kernelscope.analysis.costs.foreach import gradient_lists
from kernelscope.analysis.costs.per_op import op_bytes
from kernelscope.analysis.costs.pooling import pool_forward_bytes
from kernelscope.analysis.diagnose import Analysis
from kernelscope.analysis.peaks import datasheet_peaks
from kernelscope.analysis.trace_model import OpInputs

from support import FIXTURES
from support.recorded import analyzed

L2 = datasheet_peaks("NVIDIA H200").l2_bytes


def measured_rows(name: str) -> list[dict[str, Any]]:
    report = json.loads((FIXTURES / "resnet18_sgd" / "counters.json").read_text())
    return [r for r in report["roofline"] if r["name"] == name and r.get("measured")]


def dims(shapes: str) -> list[list[int]]:
    return [[int(d) for d in shape.split("×")] for shape in shapes.split(" · ")]


def batch_norm_inputs(row: dict[str, Any]) -> OpInputs:
    """(input, weight, bias, ...) forward; (input, grad_output, weight, ...) backward: the
    data in the row's dtype, the parameters and statistics in fp32."""
    shapes = dims(row["shapes"])
    data = 1 if row["name"] == "aten::cudnn_batch_norm" else 2
    types = [row["dtype"]] * data + ["float"] * (len(shapes) - data)
    return OpInputs(dims=[*shapes, [], []], types=[*types, "Scalar", "Scalar"])


@pytest.mark.parametrize("name", ["aten::cudnn_batch_norm", "aten::cudnn_batch_norm_backward"])
def test_batch_norm_reads_twice_what_the_l2_cannot_keep(name: str) -> None:
    rows = measured_rows(name)
    assert len(rows) >= 2
    passes = set()
    for row in rows:
        inputs = batch_norm_inputs(row)
        again = batch_norm_reread_bytes(name, inputs, row["kernel"], L2)
        passes.add(again > 0)
        modelled = (op_bytes(name, inputs) + again) * row["calls_per_step"]
        assert modelled == pytest.approx(row["bytes_per_step"], rel=0.07), row["shapes"]
        if "singleread" in row["kernel"]:
            assert again == 0
    assert passes == {True, False}  # both kinds of row are among them


def test_without_the_l2_size_no_second_pass_is_guessed() -> None:
    (row,) = [r for r in measured_rows("aten::cudnn_batch_norm") if r["calls_per_step"] == 1]
    assert batch_norm_reread_bytes(row["name"], batch_norm_inputs(row), row["kernel"], L2) > 0
    assert batch_norm_reread_bytes(row["name"], batch_norm_inputs(row), row["kernel"], 0) == 0
    other = "aten::native_batch_norm"
    assert batch_norm_reread_bytes(other, batch_norm_inputs(row), row["kernel"], L2) == 0


def test_max_pool_backward_reads_the_gradient_and_indices_not_the_input() -> None:
    (row,) = measured_rows("aten::max_pool2d_with_indices_backward")
    grad, source, indices = dims(row["shapes"])
    inputs = OpInputs(
        dims=[grad, source, [2], [2], [2], [2], [], indices],
        types=["c10::Half", "c10::Half", "ScalarList", "ScalarList", "ScalarList",
               "ScalarList", "Scalar", "long int"],
    )  # fmt: skip
    modelled = op_bytes(row["name"], inputs) * row["calls_per_step"]
    assert modelled == pytest.approx(row["bytes_per_step"], rel=0.01)


def test_max_pool_forward_writes_its_indices_too() -> None:
    """ResNet's stem: 3x3, stride 2, padding 1 (its Concrete Inputs as torch records them)."""
    (row,) = measured_rows("aten::max_pool2d_with_indices")
    (source,) = dims(row["shapes"])
    inputs = OpInputs(
        dims=[source, [], [], [], [], []],
        types=["c10::Half", "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
    )
    concrete = ["", "[3, 3]", "[2, 2]", "[1, 1]", "[1, 1]", "False"]
    modelled = op_bytes(row["name"], inputs, concrete) * row["calls_per_step"]
    assert modelled == pytest.approx(row["bytes_per_step"], rel=0.01)
    unknown = op_bytes(row["name"], inputs, [])  # no kernel size: the generic rule
    assert unknown == pytest.approx(2 * 64 * 64 * 112 * 112 * 2, rel=1e-3)


@pytest.mark.parametrize(
    ("size", "kernel", "stride", "padding", "ceil", "out"),
    [
        (112, 3, 2, 1, False, 56),
        (7, 2, 2, 0, False, 3),
        (7, 2, 2, 0, True, 4),
        (5, 3, 2, 1, True, 3),
    ],
)
def test_pooled_sizes_follow_aten(
    size: int, kernel: int, stride: int, padding: int, ceil: bool, out: int
) -> None:
    import torch

    got = torch.nn.functional.max_pool2d(
        torch.zeros(1, 1, size, size), kernel, stride, padding, ceil_mode=ceil
    ).shape[-1]
    assert got == out  # ATen's own
    args: list[Any] = [([1, 1, size, size], "float")]
    concrete = ["", f"[{kernel}, {kernel}]", f"[{stride}, {stride}]", f"[{padding}, {padding}]",
                "[1, 1]", str(ceil)]  # fmt: skip
    elements = out * out
    assert pool_forward_bytes("aten::max_pool2d_with_indices", args, concrete) == (
        size * size * 4 + elements * (4 + 8)
    )


def test_a_resnet_trace_pools_into_values_and_indices() -> None:
    """fixtures/resnet50 (inference, bf16, batch 128): its stem's max pool, through the whole
    roofline, reads 128x64x112x112 and writes 128x64x56x56 values and int64 indices."""
    from kernelscope.analysis.diagnose import analyze
    from kernelscope.analysis.facts import Options
    from kernelscope.analysis.trace_load import load_trace

    trace = load_trace(FIXTURES / "resnet50" / "raw.json.gz")
    roofline = analyze(trace, None, Options(peaks=datasheet_peaks("NVIDIA H200"))).roofline
    (pool,) = [r for r in roofline if r.name == "aten::max_pool2d_with_indices"]
    per_call = (pool.bytes_per_step or 0.0) / pool.calls_per_step
    assert per_call == pytest.approx(128 * 64 * (112 * 112 * 2 + 56 * 56 * (2 + 8)))


def analysis(raw: bool) -> Analysis:
    return analyzed("resnet18_sgd", raw)


@pytest.mark.parametrize("raw", [False, True])
def test_no_row_of_the_resnet_trace_is_above_its_roof(raw: bool) -> None:
    over = [(r.name, r.efficiency) for r in analysis(raw).roofline if (r.efficiency or 0) > 1]
    assert not over


@pytest.mark.parametrize("raw", [False, True])
def test_the_traces_batch_norm_and_pooling_rows_agree_with_the_counters(raw: bool) -> None:
    """Through the whole roofline (kernel names, shapes and the L2's size read from the
    trace): each measured batch-norm and max-pool row within 7 % of its DRAM traffic."""
    measured = {
        (r["name"], r["shapes"]): r["bytes_per_step"]
        for name in ("aten::cudnn_batch_norm", "aten::cudnn_batch_norm_backward",
                     "aten::max_pool2d_with_indices", "aten::max_pool2d_with_indices_backward")
        for r in measured_rows(name)
    }  # fmt: skip
    rows = {(r.name, r.shapes): r.bytes_per_step for r in analysis(raw).roofline}
    assert len(measured) >= 7
    for key, truth in measured.items():
        assert rows[key] == pytest.approx(truth, rel=0.07), key


def test_the_fused_sgd_step_is_exact_from_the_optimizers_lists() -> None:
    """The sidecar's count of the SGD's list (torchvision's ResNet-18: 62 tensors, 11.69 M
    elements) makes the live row the bytes the kernels move; the raw trace, without it, gets
    the same list from the gradients its first step accumulated (62 AccumulateGrad with their
    shapes), where it had the grids' bound, 1.27x: each tensor's last chunk counted whole."""
    sidecar = json.loads((FIXTURES / "resnet18_sgd" / "sidecar.json").read_text())
    (lists,) = sidecar["optimizer_lists"]
    assert (lists["optimizer"], lists["tensors"], lists["elements"]) == ("SGD", 62, 11_689_512)
    (truth,) = measured_rows("aten::_fused_sgd_")
    (live,) = [r for r in analysis(False).roofline if r.name == "aten::_fused_sgd_"]
    (raw,) = [r for r in analysis(True).roofline if r.name == "aten::_fused_sgd_"]
    assert live.bytes_per_step == pytest.approx(truth["bytes_per_step"], rel=0.01)
    assert raw.bytes_per_step == pytest.approx(truth["bytes_per_step"], rel=0.01)
    from kernelscope.analysis.trace_load import load_trace

    trace = load_trace(FIXTURES / "resnet18_sgd" / "raw.json.gz")
    first = trace.steps[0]
    # all 62, then the 21 matrices and convolutions apart from the 41 vectors (norms, a bias)
    assert gradient_lists(trace.cpu_ops, first.ts, first.end) == [
        (62, 11_689_512, lists["chunks"], "float32"),
        (21, 11_678_912, 186, "float32"),
        (41, 10_600, 41, "float32"),
    ]


def test_the_channels_last_backward_reads_again_the_part_past_what_the_l2_keeps() -> None:
    """`batchnorm_bwtr_nhwc_semiPersist` (fixtures/efficientnet_counters): the part of its
    (input, gradient) pair past 0.6 of the L2 is read again; a pair within it, not at all;
    the forward and the NCHW kernels keep their own rules."""
    kernel = "void cudnn::batchnorm_bwtr_nhwc_semiPersist<__half, float, __half, 512, 16, 3, 4>"
    name = "aten::cudnn_batch_norm_backward"

    def pair(shape: list[int]) -> OpInputs:
        stats = [[shape[1]]] * 3
        return OpInputs(
            dims=[shape, shape, *stats, [], []],
            types=["c10::Half", "c10::Half", "float", "float", "float", "Scalar", "Scalar"],
        )

    big, small = [64, 96, 112, 112], [64, 672, 7, 7]
    both = 2 * 64 * 96 * 112 * 112 * 2
    assert batch_norm_reread_bytes(name, pair(big), kernel, L2) == both - 0.6 * L2
    assert batch_norm_reread_bytes(name, pair(small), kernel, L2) == 0
    assert batch_norm_reread_bytes("aten::cudnn_batch_norm", pair(big), kernel, L2) == 0
    assert batch_norm_reread_bytes(name, pair(big), kernel, 0) == 0
