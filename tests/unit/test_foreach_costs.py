"""Foreach ops (an optimizer's ``torch._foreach_*`` step): bytes from the functor in the
multi-tensor kernel's name, and the elements from the lists' shapes or, where Kineto left a
long list's shapes out, from the kernels' grids (costs/foreach.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kernelscope.analysis.costs.foreach import (
    ACCUMULATE_GRAD,
    CHUNK_ELEMENTS,
    OPTIMIZER_STEP,
    SQUARE_INTO,
    bytes_per_element,
    foreach_bytes,
    gradient_lists,
    is_multi_tensor_op,
    list_elements,
    listed_elements,
    repeated_lists,
    writes_gradients,
)
from kernelscope.analysis.trace_load import load_trace
from kernelscope.analysis.trace_model import USER_ANNOTATION, Op, OpInputs

NS = "at::native::(anonymous namespace)::"


def kernel(functor: str) -> str:
    return (
        f"void {NS}multi_tensor_apply_kernel<{NS}TensorListMetadata<2>, {NS}{functor}, "
        f"std::plus<float>, float>({NS}TensorListMetadata<2>, {NS}{functor}, float)"
    )


def test_bytes_per_element_count_the_lists_read_and_the_one_written() -> None:
    assert bytes_per_element(kernel("BinaryOpListAlphaFunctor<float, 2, 2, 0>")) == 12
    assert bytes_per_element(kernel("BinaryOpScalarFunctor<float, 1, 1, 0>")) == 8
    assert bytes_per_element(kernel("UnaryOpFunctor<float, 2, 1, 1>")) == 8  # out of place
    assert bytes_per_element(kernel("PointwiseOpScalarFunctor<c10::BFloat16, 3, 3, 0>")) == 8
    assert bytes_per_element("void at::native::vectorized_elementwise_kernel<4, ...>") == 0


def test_the_lists_shapes_give_exact_bytes_else_the_grid_a_bound() -> None:
    shapes = OpInputs(dims=[[[4096, 4096], [4096]], [[4096, 4096], [4096]], []])
    assert listed_elements(shapes) == 4096 * 4096 + 4096
    add = kernel("BinaryOpListAlphaFunctor<float, 2, 2, 0>")
    assert foreach_bytes(shapes, add, 300) == (12.0 * (4096 * 4096 + 4096), True)
    unrecorded = OpInputs(dims=[[], [], []])
    assert listed_elements(unrecorded) == 0
    assert foreach_bytes(unrecorded, add, 300) == (12.0 * 300 * CHUNK_ELEMENTS, False)
    assert foreach_bytes(unrecorded, "void other_kernel<float>()", 300) == (0.0, True)
    corrupt = OpInputs(dims=[[[4096, -1]], []])
    assert listed_elements(corrupt) == 0


def span(cat: str, name: str, ts: float, dur: float, index: int, parent: int) -> Op:
    return Op(cat, name, 1, 1, ts, dur, b"{}", dur, index=index, parent=parent)


def step(optimizer: str, *before: str) -> tuple[list[Op], Op]:
    """An optimizer step's range around `before` ops and a ``_foreach_addcmul_`` after them."""
    ops = [span(USER_ANNOTATION, f"{OPTIMIZER_STEP}{optimizer}.step", 0.0, 100.0, 0, -1)]
    for name in before:
        ops.append(span("cpu_op", name, len(ops), 0.5, len(ops), 0))
    ops.append(span("cpu_op", SQUARE_INTO, 50.0, 1.0, len(ops), 0))
    return ops, ops[-1]


def test_an_optimizer_that_squares_its_gradients_reads_the_list_once() -> None:
    """Adam's `addcmul_(exp_avg_sqs, g, g)`: 3 lists, not 4 (the fixtures' AdamW steps, with
    Nsight Compute's bytes, are in test_neox_train.py)."""
    addcmul = kernel("PointwiseOpScalarFunctor<float, 3, 3, 0>")
    assert bytes_per_element(addcmul) == 16
    assert bytes_per_element(addcmul, repeated=1) == 12
    # the state's decay right before: torch.optim's squaring steps, and a user's like them
    for optimizer in ("Adam", "AdamW", "NAdam", "RAdam", "RMSprop", "Adadelta", "MyAdamW"):
        assert repeated_lists(*step(optimizer, "aten::_foreach_mul_")) == 1, optimizer
        # NAdam's and RAdam's other addcmul_ (params, exp_avgs, buffer) follow other ops
        assert repeated_lists(*step(optimizer, "aten::_foreach_add_")) == 0, optimizer
        assert repeated_lists(*step(optimizer)) == 0, optimizer
    # Adam with a tensor beta2 scales the gradients into a new list first: two lists differ
    assert repeated_lists(*step("Adam", "aten::_foreach_mul_", "aten::_foreach_mul")) == 0
    # the decay's own per-tensor ops (a CPU step) are not foreach ops: still right after it
    assert repeated_lists(*step("AdamW", "aten::_foreach_mul_", "aten::mul_")) == 1
    assert repeated_lists(*step("Adagrad", "aten::_foreach_add_")) == 1  # no decay before
    for optimizer in ("ASGD", "Rprop", "SGD"):  # theirs never square
        assert repeated_lists(*step(optimizer, "aten::_foreach_mul_")) == 0, optimizer
    ops, addcmul_op = step("Adam")
    outside = span("cpu_op", SQUARE_INTO, 200.0, 1.0, len(ops), -1)
    assert repeated_lists([*ops, outside], outside) == 0  # not inside an optimizer's step
    assert repeated_lists(ops, ops[0]) == 0 and addcmul_op.name == SQUARE_INTO


def fused(functor: str) -> str:
    return (
        f"void {NS}multi_tensor_apply_kernel<{NS}FusedOptimizerTensorListMetadata<4>, "
        f"{NS}{functor}, double, double>({NS}FusedOptimizerTensorListMetadata<4>, "
        f"{NS}{functor}, double, double)"
    )


def test_a_fused_step_reads_every_list_and_writes_all_but_the_gradients() -> None:
    """AdamW(fused=True): params, grads, exp_avgs, exp_avg_sqs read; all but the grads
    written (ATen's fused_adam_utils.cuh), the grads too under a GradScaler (its scale
    passed as grad_scale, the step's second-to-last argument: the argument types below are
    those a CPU profile of torch 2.13's fused AdamW recorded, with and without a GradScaler).
    Not yet measured against Nsight Compute (docs/h200-run/NEXT.md)."""
    adamw = fused("FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>")
    assert bytes_per_element(adamw) == 4 * 7
    assert bytes_per_element(adamw, grads_written=True) == 4 * 8
    amsgrad = fused("FusedAdamMathFunctor<float, 5, (at::native::ADAM_MODE)1, true>")
    assert bytes_per_element(amsgrad) == 4 * 9
    assert bytes_per_element(fused("FusedSgdMathFunctor<c10::BFloat16, 3>")) == 2 * 5
    assert is_multi_tensor_op("aten::_fused_adamw_") and is_multi_tensor_op("aten::_foreach_add_")
    assert not is_multi_tensor_op("aten::add_")
    plain = ["TensorList"] * 6 + ["Scalar"] * 7 + ["", ""]
    scaled = ["TensorList"] * 6 + ["Scalar"] * 7 + ["float", "float"]
    assert not writes_gradients(OpInputs(types=plain))
    assert writes_gradients(OpInputs(types=scaled))
    blocks = 1000
    unrecorded = OpInputs(dims=[[]] * 6, types=scaled)
    assert foreach_bytes(unrecorded, adamw, blocks) == (32.0 * blocks * CHUNK_ELEMENTS, False)


@pytest.mark.parametrize(
    ("optimizer", "kwargs", "squares"),
    [
        ("Adam", {}, [1]),
        ("AdamW", {}, [1]),
        ("NAdam", {}, [1]),
        ("RAdam", {}, [1, 0]),  # then (params, exp_avgs, buffer)
        ("RMSprop", {"centered": True}, [1]),  # its centered square is out of place
        ("Adadelta", {}, [1, 1]),  # gradients, then deltas
        ("Adagrad", {}, [1]),
        ("ASGD", {}, [0, 0]),
        ("Rprop", {}, [0]),
    ],
)
def test_the_squaring_addcmul_of_torch_optims_real_steps(
    tmp_path: Path, optimizer: str, kwargs: dict[str, Any], squares: list[int]
) -> None:
    """One step of each of torch.optim's foreach optimizers recorded by the real profiler
    (CPU): which of its ``_foreach_addcmul_`` read a list passed twice, as its source says."""
    import torch

    model = torch.nn.Linear(8, 8)
    opt = getattr(torch.optim, optimizer)(model.parameters(), lr=0.01, foreach=True, **kwargs)
    model(torch.ones(2, 8)).sum().backward()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        opt.step()
    path = tmp_path / "step.json"
    prof.export_chrome_trace(str(path))
    trace = load_trace(path)
    found = [repeated_lists(trace.ops, op) for op in trace.ops if op.name == SQUARE_INTO]
    assert found == squares


def test_an_optimizers_list_whose_chunks_are_the_blocks_gives_the_elements() -> None:
    """The worker's lists (tensors, elements, chunks, dtype): the one of the kernel's dtype
    whose chunks are the op's blocks gives its elements exactly; lists of other elements
    with the same chunks give none: the bound. So does any list of as many tensors as the
    blocks (an op over that many 0-d counters, Adam's capturable step count, runs so)."""
    from kernelscope.analysis.costs.foreach import kernel_dtype, list_elements

    add = kernel("BinaryOpListAlphaFunctor<float, 2, 2, 0>")
    assert kernel_dtype(add) == "float32"
    assert kernel_dtype(kernel("FusedAdamMathFunctor<c10::BFloat16, 4, 1, false>")) == "bfloat16"
    assert kernel_dtype("void other_kernel<float>()") == ""
    unrecorded = OpInputs(dims=[[], [], []])
    neox = (76, 70_557_696, 1126, "float32")
    assert foreach_bytes(unrecorded, add, 1126, lists=[neox]) == (12.0 * 70_557_696, True)
    bound = (12.0 * 1125 * CHUNK_ELEMENTS, False)
    assert foreach_bytes(unrecorded, add, 1125, lists=[neox]) == bound
    halves = (76, 70_557_696, 1126, "bfloat16")  # another dtype's list: not the kernel's
    assert foreach_bytes(unrecorded, add, 1126, lists=[halves])[1] is False
    assert list_elements([neox, (2, 1000, 40, "float32")], 40) == 1000
    assert list_elements([neox, neox], 1126) == 70_557_696  # two alike: the same elements
    assert list_elements([(5, 900_000, 16, "float32"), (6, 910_000, 16, "float32")], 16) == 0
    assert list_elements([(40, 4000, 40, "float32")], 40) == 0  # a chunk a tensor
    # 76 counters run 76 blocks: another group's list of 76 chunks cannot be told from them
    assert list_elements([neox, (9, 4_000_000, 76, "float32")], 76) == 0
    shapes = OpInputs(dims=[[[4096, 4096], [4096]], []])  # the trace's shapes come first
    assert foreach_bytes(shapes, add, 257, lists=[neox]) == (12.0 * (4096 * 4096 + 4096), True)


def accumulate(ts: float, dims: Any, dtype: str = "float") -> Op:
    args = json.dumps({"Input Dims": [dims], "Input type": [dtype]}).encode()
    return Op("cpu_op", ACCUMULATE_GRAD, 1, 1, ts, 1.0, args, 1.0, index=0, parent=-1)


def test_a_raw_traces_lists_are_the_gradients_its_first_step_accumulated() -> None:
    """One AccumulateGrad per parameter, with its shape: per dtype, the tensors, elements and
    chunks of 65,536 (a 0-d parameter is one element, one chunk); those outside the step, of
    no dtype torch names, or of a corrupt shape are not counted."""
    ops = [
        accumulate(5.0, [4096, 4096]),  # 256 chunks
        accumulate(10.0, [4096, 4096]),
        accumulate(11.0, [1000]),  # 1 chunk
        accumulate(12.0, []),  # a 0-d parameter (a learned temperature)
        accumulate(13.0, [64], "c10::BFloat16"),
        accumulate(14.0, [2, -1]),
        accumulate(15.0, [8], "bool"),
        accumulate(150.0, [4096, 4096]),  # the next step
    ]
    assert gradient_lists(ops, 10.0, 100.0) == [
        (3, 4096 * 4096 + 1000 + 1, 256 + 1 + 1, "float32"),  # all
        (1, 4096 * 4096, 256, "float32"),  # the matrices (weight decay's group)
        (2, 1000 + 1, 2, "float32"),  # the vectors
        (1, 64, 1, "bfloat16"),  # vectors alone: no groups apart
    ]
    # a group of vectors has a chunk a tensor: its ops could be as many 0-d tensors' (the
    # step counters, a capturable Adam's bias corrections), so they stay a bound
    vectors = [(50, 40_960, 50, "float32")]
    assert list_elements(vectors, 50, "float32") == 0
    assert gradient_lists(ops, 200.0, 300.0) == []
    # with two micro-batches each parameter comes twice: 2x the chunks, no op's blocks
    twice = [accumulate(20.0 + i, [4096, 4096]) for i in range(2)]
    ((_, _, chunks, _),) = gradient_lists(twice, 0.0, 100.0)
    assert list_elements([(2, 2 * 4096 * 4096, chunks, "float32")], 256) == 0
