"""cuDNN's two-pass batch norm kernels and max pooling's backward against Nsight Compute, on a
ResNet-18 training step measured on the H200 (fixtures/resnet18_sgd: issue 24, item 3). No
trace is kept there; each row's inputs are rebuilt from the shapes its report recorded, in
the argument layout ATen gives these ops."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kernelscope.analysis.costs.batch_norm import batch_norm_reread_bytes
from kernelscope.analysis.costs.per_op import op_bytes
from kernelscope.analysis.peaks import datasheet_peaks
from kernelscope.analysis.trace_model import OpInputs

from support import FIXTURES

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
