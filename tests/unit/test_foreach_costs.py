"""Foreach ops (an optimizer's ``torch._foreach_*`` step): bytes from the functor in the
multi-tensor kernel's name, and the elements from the lists' shapes or, where Kineto left a
long list's shapes out, from the kernels' grids (costs/foreach.py)."""

from __future__ import annotations

from kernelscope.analysis.costs.foreach import (
    CHUNK_ELEMENTS,
    bytes_per_element,
    foreach_bytes,
    listed_elements,
)
from kernelscope.analysis.trace_model import OpInputs

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
    assert bytes_per_element(kernel("FusedAdamMathFunctor<float, 4, ADAM_MODE::ADAMW>")) == 0


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
