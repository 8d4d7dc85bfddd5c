"""Convolutions, forward (plain, transposed, fused) and backward: FLOPs from the weight and the
output positions, bytes the operands read and the result written.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kernelscope.analysis.costs.tensors import (
    DTYPE_BYTES,
    FLAGS,
    Tensor,
    concrete_ints,
    concrete_per_dim,
    concrete_value,
    numel,
    size_of,
)


class _Conv(NamedTuple):
    """Concrete Inputs positions of a convolution's arguments (-1: not an argument of it);
    ``transposed``: always transposed, else ``transposed_at`` holds the flag."""

    stride: int
    padding: int
    dilation: int
    groups: int = -1
    output_padding: int = -1
    transposed: bool = False
    transposed_at: int = -1


_GENERIC = _Conv(3, 4, 5, groups=8, output_padding=7, transposed_at=6)
_FUNCTIONAL = _Conv(3, 4, 5, groups=6)
_FUNCTIONAL_T = _Conv(3, 4, 7, groups=6, output_padding=5, transposed=True)
_CUDNN = _Conv(3, 2, 4, groups=5)
_MIOPEN = _Conv(4, 3, 5, groups=6)
_FUSED = _Conv(3, 4, 5, groups=6)  # (self, weight, bias, stride, padding, dilation, groups)
_FUSED_ADD = _Conv(5, 6, 7, groups=8)  # (self, weight, z, alpha, bias, stride, ...)
_SLOW = _Conv(4, 5, 6)  # (self, weight, kernel_size, bias, stride, padding, dilation)
_SLOW_T = _Conv(4, 5, 7, output_padding=6, transposed=True)
CONV_FORWARD = {
    "aten::convolution": _GENERIC,
    "aten::_convolution": _GENERIC,
    "aten::convolution_overrideable": _GENERIC,
    "aten::conv1d": _FUNCTIONAL,
    "aten::conv2d": _FUNCTIONAL,
    "aten::conv3d": _FUNCTIONAL,
    "aten::_convolution_mode": _FUNCTIONAL,
    "aten::conv_transpose1d": _FUNCTIONAL_T,
    "aten::conv_transpose2d": _FUNCTIONAL_T,
    "aten::conv_transpose3d": _FUNCTIONAL_T,
    "aten::cudnn_convolution": _CUDNN,
    "aten::cudnn_convolution_transpose": _Conv(
        4, 2, 5, groups=6, output_padding=3, transposed=True
    ),
    "aten::cudnn_convolution_relu": _FUSED,
    "aten::cudnn_convolution_add_relu": _FUSED_ADD,
    "aten::miopen_convolution": _MIOPEN,
    "aten::miopen_depthwise_convolution": _MIOPEN,
    "aten::miopen_convolution_transpose": _Conv(
        5, 3, 6, groups=7, output_padding=4, transposed=True
    ),
    "aten::miopen_convolution_relu": _FUSED,
    "aten::miopen_convolution_add_relu": _FUSED_ADD,
    "aten::mkldnn_convolution": _MIOPEN,
    "aten::_conv_depthwise2d": _SLOW,
    "aten::conv_depthwise3d": _SLOW,
    "aten::slow_conv_dilated2d": _SLOW,
    "aten::slow_conv_dilated3d": _SLOW,
    "aten::_slow_conv2d_forward": _Conv(4, 5, -1),
    "aten::thnn_conv2d": _Conv(4, 5, -1),
    "aten::slow_conv3d": _Conv(4, 5, -1),
    "aten::slow_conv3d_forward": _Conv(4, 5, -1),
    "aten::slow_conv_transpose2d": _SLOW_T,
    "aten::slow_conv_transpose3d": _SLOW_T,
}
#: Backward convolutions: (grad_output, input, weight, ...), the Concrete Inputs positions of
#: ``output_mask`` (grad input, grad weight, grad bias) and of ``transposed`` (-1: never).
CONV_BACKWARD = {
    "aten::convolution_backward": (10, 7),
    "aten::convolution_backward_overrideable": (9, 6),
    "aten::_slow_conv2d_backward": (6, -1),
}
CONVOLUTIONS = frozenset(CONV_FORWARD) | frozenset(CONV_BACKWARD)


def conv_costs(where: _Conv, args: list[Tensor | None], concrete: list[Any]) -> tuple[float, float]:
    """A convolution: 2 · N · numel(weight) · positions, the positions those of the output (of
    the input where transposed: a transposed weight is (C_in, C_out/groups, k...)). Weight
    (C_out, C_in/groups, k...) holds the groups. Inputs read, the output written, its size
    from stride, padding, dilation (and output_padding); padding not recorded is taken as
    "same"."""
    x, w = args[0], args[1]
    if x is None or w is None:
        raise ValueError("a convolution without input or weight")
    xs, ws = x[0], w[0]
    spatial = len(ws) - 2
    if spatial < 1 or len(xs) < spatial + 1:
        raise ValueError("shapes of no convolution")
    batch, sizes, kernel = numel(xs[: -spatial - 1]), xs[-spatial:], ws[2:]
    transposed = where.transposed or concrete_value(concrete, where.transposed_at) == "True"
    stride = concrete_per_dim(concrete, where.stride, spatial) or [1] * spatial
    dilation = concrete_per_dim(concrete, where.dilation, spatial) or [1] * spatial
    padding = concrete_per_dim(concrete, where.padding, spatial)  # a str padding is recorded as ''
    pads: list[int | None] = [None] * spatial if padding is None else [*padding]
    extra = concrete_per_dim(concrete, where.output_padding, spatial) or [0] * spatial
    out = list(map(_out_size, sizes, kernel, stride, pads, dilation, extra, [transposed] * spatial))
    groups = (concrete_ints(concrete, where.groups) or [1])[0]
    channels = ws[1] * max(1, groups) if transposed else ws[0]
    flops = 2.0 * batch * numel(ws) * numel(sizes if transposed else out)
    written = batch * channels * numel(out) * DTYPE_BYTES[x[1]]
    return flops, float(sum(map(size_of, args)) + written)


def _out_size(
    n: int, k: int, stride: int, padding: int | None, dilation: int, extra: int, transposed: bool
) -> int:
    """One output dimension of a convolution (of its transpose where ``transposed``)."""
    s, d = max(1, stride), max(1, dilation)
    if transposed:
        return max(
            0, n * s if padding is None else (n - 1) * s - 2 * padding + d * (k - 1) + extra + 1
        )
    return max(0, -(-n // s) if padding is None else (n + 2 * padding - d * (k - 1) - 1) // s + 1)


def conv_backward_costs(
    mask_at: int, transposed_at: int, args: list[Tensor | None], concrete: list[Any]
) -> tuple[float, float]:
    """A convolution's backward: the forward's FLOPs once for grad input and once for grad
    weight, as ``output_mask`` asks. Reads grad_output, the weight (for grad input) and the
    input (for grad weight); writes the grads asked for."""
    g, x, w = args[0], args[1], args[2]
    if g is None or x is None or w is None:
        raise ValueError("a convolution backward without grad_output, input or weight")
    spatial = len(w[0]) - 2
    if spatial < 1 or len(g[0]) < spatial + 1 or len(x[0]) < spatial:
        raise ValueError("shapes of no convolution")
    flags = FLAGS.findall(concrete_value(concrete, mask_at))
    mask = [f == "True" for f in flags] if len(flags) == 3 else [True, True, False]
    transposed = concrete_value(concrete, transposed_at) == "True"
    positions = numel((x if transposed else g)[0][-spatial:])
    forward = 2.0 * numel(g[0][: -spatial - 1]) * numel(w[0]) * positions
    flops = forward * (mask[0] + mask[1])
    bias = g[0][-spatial - 1] * DTYPE_BYTES[g[1]] if mask[2] else 0
    # grad input reads the weight and writes the input's size, grad weight the other way round
    moved = size_of(g) + (size_of(w) + size_of(x)) * (mask[0] + mask[1]) + bias
    return flops, float(moved)
