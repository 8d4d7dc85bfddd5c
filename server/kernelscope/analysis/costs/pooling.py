"""Max pooling's backward: it reads the incoming gradient and the indices the forward
saved, and writes the input's gradient; the input itself (its second argument) gives only
the shape. Nsight Compute on the H200 (docs/h200-run/tenth/fused_heldout.txt, ResNet-18's
stem, fp16, batch 64): 231.2 MB a call, this model 231.2, the generic rule (every argument
read) 334.0."""

from __future__ import annotations

from kernelscope.analysis.costs.tensors import DTYPE_BYTES, Tensor, arg_at, numel, size_of

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
