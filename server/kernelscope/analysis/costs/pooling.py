"""Max pooling with indices. The forward reads its input and writes the pooled values and,
in int64, the index of each; the backward reads the incoming gradient and those indices and
writes the input's gradient, the input itself (its second argument) giving only the shape.
Nsight Compute on the H200 (docs/h200-run/tenth/fused_heldout.txt, ResNet-18's stem, fp16,
batch 64): forward 231.2 MB a call, this model 231.3, the generic rule (the input read, a
copy of it written) 205.5; backward 231.2 MB, this model 231.2, the generic rule (every
argument read) 334.0."""

from __future__ import annotations

from typing import Any

from kernelscope.analysis.costs.tensors import (
    DTYPE_BYTES,
    Tensor,
    arg_at,
    concrete_per_dim,
    concrete_value,
    numel,
    size_of,
)

#: (self, kernel_size, stride, padding, dilation, ceil_mode)
POOL_FORWARD = frozenset({"aten::max_pool2d_with_indices", "aten::max_pool3d_with_indices"})
_INDEX_BYTES = 8  # the indices are int64

#: (grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices)
POOL_BACKWARD = frozenset(
    {"aten::max_pool2d_with_indices_backward", "aten::max_pool3d_with_indices_backward"}
)
_INDICES = 7


def pool_backward_bytes(args: list[Tensor | None]) -> float:
    """Bytes one call moves: the gradient and the indices read, the input's gradient written
    (the input's shape in the gradient's dtype); 0 where the tensors are not all there."""
    grad, source, indices = arg_at(args, 0), arg_at(args, 1), arg_at(args, _INDICES)
    if grad is None or source is None or indices is None:
        return 0.0
    return float(size_of(grad) + size_of(indices) + numel(source[0]) * DTYPE_BYTES[grad[1]])


def pool_forward_bytes(name: str, args: list[Tensor | None], concrete: list[Any]) -> float:
    """Bytes one call moves: the input read, the values and int64 indices written, their
    shape from the kernel, stride, padding, dilation and ceil_mode (``Concrete Inputs``); 0
    where the input or the kernel size is not recorded."""
    source = arg_at(args, 0)
    if source is None:
        return 0.0
    shape, dtype = source
    spatial = 3 if "3d" in name else 2
    kernel = concrete_per_dim(concrete, 1, spatial)
    if kernel is None or len(shape) < spatial + 1:
        return 0.0
    stride = concrete_per_dim(concrete, 2, spatial) or kernel
    padding = concrete_per_dim(concrete, 3, spatial) or [0] * spatial
    dilation = concrete_per_dim(concrete, 4, spatial) or [1] * spatial
    ceil = concrete_value(concrete, 5) == "True"
    sizes = shape[-spatial:]
    out = [
        _pooled(n, k, s, p, d, ceil)
        for n, k, s, p, d in zip(sizes, kernel, stride, padding, dilation, strict=True)
    ]
    elements = numel([*shape[:-spatial], *out])
    return float(size_of(source) + elements * (DTYPE_BYTES[dtype] + _INDEX_BYTES))


def _pooled(n: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    """One output dimension of a pooling window (ATen's pooling_output_shape)."""
    s = max(1, s)
    span = n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)
    out = span // s + 1
    if ceil and (out - 1) * s >= n + p:  # the last window must start inside the input
        out -= 1
    return max(0, out)
