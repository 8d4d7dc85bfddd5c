"""FLOPs and bytes of an op, from the shapes, dtypes and scalar arguments Kineto records
(``record_shapes=True``: ``Input Dims``, ``Input type``, ``Concrete Inputs``).

FLOPs are counted for matrix products, matrix-vector products, convolutions (forward and
backward) and attention (every SDPA backend, forward and backward), 2 per multiply-add. For
those ops bytes are the operands read once and the result written once, its shape worked out
from the arguments; for every other op each input is read once and the output written once,
the output nothing for reductions and the largest input for the rest (elementwise ops and
copies). Arguments are read at their positions in the op's ATen signature.
"""

from __future__ import annotations

import math
import re
from itertools import compress
from operator import attrgetter, methodcaller
from typing import Any, NamedTuple, cast

import msgspec

from kernelscope.analysis.trace_model import Op, OpInputs

DTYPE_BYTES = {
    "double": 8,
    "float": 4,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
    "c10::Float8_e8m0fnu": 1,
    "c10::Float4_e2m1fn_x2": 1,
    "long int": 8,
    "int": 4,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "long unsigned int": 8,
    "unsigned int": 4,
    "short unsigned int": 2,
    "bool": 1,
    "c10::complex<c10::Half>": 4,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
}
#: Bytes per element of the ScalarType numbers ``Concrete Inputs`` gives for a dtype argument.
SCALAR_TYPE_BYTES = {
    0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 8: 4, 9: 8, 10: 16, 11: 1, 15: 2,
    23: 1, 24: 1, 25: 1, 26: 1, 27: 2, 28: 4, 29: 8,
}  # fmt: skip


class _Operands(NamedTuple):
    """Where a product's operands are: the left and right factors and the tensor added
    (``self`` of addmm, scaled by ``beta`` at Concrete Inputs 3; -1: none); ``out_dtype``:
    the Concrete Inputs position of an output dtype (-1: the left factor's dtype)."""

    a: int
    b: int
    added: int = -1
    out_dtype: int = -1


_PRODUCTS = {
    "aten::mm": _Operands(0, 1),
    "aten::addmm": _Operands(1, 2, added=0),
    "aten::_addmm_activation": _Operands(1, 2, added=0),
    "aten::bmm": _Operands(0, 1),
    "aten::baddbmm": _Operands(1, 2, added=0),
    "aten::addbmm": _Operands(1, 2, added=0),
    "aten::matmul": _Operands(0, 1),
    "aten::linear": _Operands(0, 1),
    "aten::_scaled_mm": _Operands(0, 1, out_dtype=6),
    "aten::_scaled_mm_v2": _Operands(0, 1, out_dtype=9),
    "aten::mv": _Operands(0, 1),
    "aten::addmv": _Operands(1, 2, added=0),
    "aten::addmv_": _Operands(1, 2, added=0),
    "aten::dot": _Operands(0, 1),
    "aten::vdot": _Operands(0, 1),
}
#: Matrix-vector products (GEMV, dot): memory-bound, not matmuls to the analysis.
MATVECS = frozenset({"aten::mv", "aten::addmv", "aten::addmv_", "aten::dot", "aten::vdot"})
#: Matrix products; ``matmul_dtype`` gives their dtype for the peak.
MATMULS = frozenset(_PRODUCTS) - MATVECS


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
_CONV_FORWARD = {
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
_CONV_BACKWARD = {
    "aten::convolution_backward": (10, 7),
    "aten::convolution_backward_overrideable": (9, 6),
    "aten::_slow_conv2d_backward": (6, -1),
}
CONVOLUTIONS = frozenset(_CONV_FORWARD) | frozenset(_CONV_BACKWARD)


class _Attention(NamedTuple):
    """Where an attention op's arguments are. Tensors: q, k, v at 0-2 (forward) or 1-3 after
    grad_out (backward); ``out`` and ``bias`` (-1: none); ``cum_seq_q`` (set for packed
    variable-length batches). Concrete Inputs: ``causal`` (is_causal, or custom_mask_type
    where ``mask_type``: 0 none, 1 and 2 causal) and ``max_k`` (the longest key sequence)."""

    bshd: bool  # (batch, seq, heads, dim) rather than (batch, heads, seq, dim)
    backward: bool
    causal: int
    mask_type: bool = False
    bias: int = -1
    out: int = -1
    cum_seq_q: int = -1
    max_k: int = -1


_ATTENTION = {
    "aten::scaled_dot_product_attention": _Attention(False, False, 5, bias=3),
    "aten::_scaled_dot_product_flash_attention": _Attention(False, False, 4),
    "aten::_scaled_dot_product_efficient_attention": _Attention(False, False, 6, bias=3),
    "aten::_scaled_dot_product_cudnn_attention": _Attention(False, False, 6, bias=3),
    "aten::_scaled_dot_product_fused_attention_overrideable": _Attention(False, False, 5, bias=3),
    "aten::_flash_attention_forward": _Attention(True, False, 8, cum_seq_q=3, max_k=6),
    "aten::_efficient_attention_forward": _Attention(
        True, False, 9, mask_type=True, bias=3, cum_seq_q=4, max_k=7
    ),
    "aten::_cudnn_attention_forward": _Attention(False, False, 10, bias=3, cum_seq_q=4, max_k=7),
    "aten::_scaled_dot_product_flash_attention_backward": _Attention(False, True, 11, out=4),
    "aten::_scaled_dot_product_efficient_attention_backward": _Attention(
        False, True, 11, bias=4, out=5
    ),
    "aten::_scaled_dot_product_cudnn_attention_backward": _Attention(
        False, True, 14, bias=8, out=4
    ),
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": _Attention(
        False, True, 13, bias=4, out=6
    ),
    "aten::_flash_attention_backward": _Attention(True, True, 11, out=4, cum_seq_q=6, max_k=9),
    "aten::_efficient_attention_backward": _Attention(
        True, True, 14, mask_type=True, bias=4, out=5, cum_seq_q=6, max_k=9
    ),
    "aten::_cudnn_attention_backward": _Attention(
        False, True, 14, bias=8, out=4, cum_seq_q=9, max_k=12
    ),
}
ATTENTION = frozenset(_ATTENTION)
FLOP_OPS = MATMULS | MATVECS | CONVOLUTIONS | ATTENTION
#: Ops whose FLOPs or bytes depend on their ``Concrete Inputs`` (strides, is_causal, beta,
#: out_dtype ...): the memo key holds those too.
BY_CONCRETE = (
    CONVOLUTIONS
    | ATTENTION
    | frozenset(n for n, p in _PRODUCTS.items() if p.added >= 0 or p.out_dtype >= 0)
)
REDUCTIONS = frozenset(
    {
        "aten::sum",
        "aten::mean",
        "aten::amax",
        "aten::amin",
        "aten::max",
        "aten::min",
        "aten::norm",
        "aten::linalg_vector_norm",
        "aten::prod",
        "aten::argmax",
        "aten::argmin",
        "aten::any",
        "aten::all",
        "aten::std",
        "aten::var",
        "aten::nonzero",
        "aten::_local_scalar_dense",
    }
)
_INTS = re.compile(r"-?\d+")
_FLAGS = re.compile(r"True|False")
_MAX_NUMEL = 2**62  # more elements than any memory holds: a corrupt shape
_ABSENT = msgspec.Raw(b"")  # not valid JSON: no field's raw text equals it
_SEPARATOR = b"\0"  # nor does any hold a NUL byte: joined, they are told apart
_CONCRETE_MARK = b"\x01"  # nor start with this
_ENCODE = methodcaller("encode", "utf-8", "surrogatepass")  # any str, one to one
_NAME = attrgetter("name")
_DIMS = attrgetter("dims")
_TYPES = attrgetter("types")

_Tensor = tuple[list[int], str]  # (shape, dtype)


def numel(dims: list[int]) -> int:
    """Elements of a shape ([] is a scalar: 1)."""
    return math.prod(dims) if dims else 1


def _by_position(inputs: OpInputs) -> list[_Tensor | None] | None:
    """(shape, dtype) of each argument that is a tensor, None for the others (scalars, lists,
    Nones). None for all when a tensor's shape is impossible (a negative size, more than 2⁶²
    elements): the op's shapes are corrupt, and its FLOPs and bytes unknown."""
    out: list[_Tensor | None] = []
    for dims, dtype in zip(inputs.dims, inputs.types, strict=False):
        tensor: _Tensor | None = None
        if dtype in DTYPE_BYTES and isinstance(dims, list):
            shape = cast(list[object], dims)
            if all(type(d) is int for d in shape):
                sizes = cast(list[int], shape)
                if not _possible(sizes):
                    return None
                tensor = (sizes, dtype)
        out.append(tensor)
    return out


def _tensors(inputs: OpInputs) -> list[_Tensor]:
    """(shape, dtype) of each tensor input; none at all when a shape is corrupt."""
    return [t for t in _by_position(inputs) or [] if t is not None]


def _possible(sizes: list[int]) -> bool:
    """No size negative or above 2⁶², and at most 2⁶² elements (no huge products made)."""
    n = 1
    for d in sizes:
        if not 0 <= d <= _MAX_NUMEL:
            return False
        n *= d
        if n > _MAX_NUMEL:
            return False
    return True


def _at(args: list[_Tensor | None], index: int) -> _Tensor | None:
    return args[index] if 0 <= index < len(args) else None


def _size(tensor: _Tensor | None) -> int:
    """Bytes of a tensor (0 for None)."""
    return numel(tensor[0]) * DTYPE_BYTES[tensor[1]] if tensor else 0


class _Concrete(msgspec.Struct):
    values: list[Any] = msgspec.field(default_factory=list[Any], name="Concrete Inputs")


_CONCRETE = msgspec.json.Decoder(_Concrete)


def concrete_inputs(op: Op) -> list[Any]:
    """The op's ``Concrete Inputs`` (scalar arguments as strings); empty when absent."""
    try:
        return _CONCRETE.decode(op.args).values
    except msgspec.MsgspecError:
        return []


def _concrete(values: list[Any], index: int) -> str:
    """The Concrete Inputs value at ``index``; '' when absent."""
    value = values[index] if 0 <= index < len(values) else ""
    return value if isinstance(value, str) else ""


def _concrete_ints(values: list[Any], index: int) -> list[int]:
    return [int(v) for v in _INTS.findall(_concrete(values, index))]


def _concrete_number(values: list[Any], index: int) -> float | None:
    try:
        return float(_concrete(values, index))
    except ValueError:
        return None


def flops_of(op: Op) -> float:
    """FLOPs of one recorded call of `op`."""
    if op.name not in FLOP_OPS:
        return 0.0
    return op_flops(op.name, op.inputs(), concrete_inputs(op) if op.name in BY_CONCRETE else [])


def bytes_of(op: Op) -> float:
    """Bytes one recorded call of `op` moves through memory."""
    return op_bytes(op.name, op.inputs(), concrete_inputs(op) if op.name in BY_CONCRETE else [])


def op_flops(name: str, inputs: OpInputs, concrete: list[Any] | None = None) -> float:
    """Floating-point operations of one call; 0 when the op or its shapes are not known."""
    if name not in FLOP_OPS:
        return 0.0
    costs = _costs(name, inputs, concrete or [])
    return costs[0] if costs else 0.0


GENERATED_KERNEL_PREFIX = ("triton_",)


def op_bytes(name: str, inputs: OpInputs, concrete: list[Any] | None = None) -> float:
    """Bytes one call moves through memory: inputs read once, the output written once."""
    costs = _costs(name, inputs, concrete or []) if name in FLOP_OPS else None
    if costs:
        return costs[1]
    t = _tensors(inputs)
    if not t:
        return 0.0
    read = sum(map(_size, t))
    # an Inductor-generated Triton kernel is recorded with its output buffers among its
    # arguments: each is read or written once
    generated = name.startswith(GENERATED_KERNEL_PREFIX)
    written = 0 if name in REDUCTIONS or generated else max(map(_size, t))
    return float(read + written)


def _costs(name: str, inputs: OpInputs, concrete: list[Any]) -> tuple[float, float] | None:
    """(FLOPs, bytes) of an op of FLOP_OPS; None when its shapes do not fit its signature."""
    args = _by_position(inputs)
    if args is None:
        return (0.0, 0.0)
    try:
        if name in _PRODUCTS:
            return _product(name, args, concrete)
        if name in _CONV_FORWARD:
            return _conv(_CONV_FORWARD[name], args, concrete)
        if name in _CONV_BACKWARD:
            return _conv_backward(*_CONV_BACKWARD[name], args, concrete)
        if name in _ATTENTION:
            return _attention(_ATTENTION[name], args, concrete)
    except (IndexError, ValueError, OverflowError):
        pass
    return None


def _product(
    name: str, args: list[_Tensor | None], concrete: list[Any]
) -> tuple[float, float] | None:
    """A matrix or matrix-vector product: 2·M·K·N (batched and broadcast as torch.matmul
    does); every tensor argument read (the added one not where beta is 0), the product
    written."""
    where = _PRODUCTS[name]
    a, b = _at(args, where.a), _at(args, where.b)
    if a is None or b is None:
        return None
    x, y = a[0], b[0]
    if name == "aten::linear":  # weight (N, K)
        out = [*x[:-1], y[0]] if len(y) == 2 else x[:-1]
    elif name == "aten::addbmm":  # the batch is summed: (B, M, K) @ (B, K, N) -> (M, N)
        out = [x[0], x[1], y[2]]
    elif len(x) == 1 and len(y) == 1:
        out = []
    elif len(x) == 1:
        out = [*y[:-2], y[-1]]
    elif len(y) == 1:
        out = x[:-1]
    else:
        out = [*_broadcast(x[:-2], y[:-2]), x[-2], y[-1]]
    flops = 2.0 * numel(out) * x[-1]
    if name == "aten::addbmm":
        out = out[1:]
    read = sum(map(_size, args))
    if where.added >= 0 and _concrete_number(concrete, 3) == 0:
        read -= _size(_at(args, where.added))  # beta = 0: torch does not read it
    out_size = DTYPE_BYTES[a[1]]
    if where.out_dtype >= 0:
        dtype = _concrete_ints(concrete, where.out_dtype)
        if len(dtype) == 1:
            out_size = SCALAR_TYPE_BYTES.get(dtype[0], out_size)
    return flops, float(read + numel(out) * out_size)


def _broadcast(a: list[int], b: list[int]) -> list[int]:
    """The broadcast of two batch shapes."""
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
    return [max(p, q) if 1 in (p, q) else p for p, q in zip(a, b, strict=True)]


def _conv(where: _Conv, args: list[_Tensor | None], concrete: list[Any]) -> tuple[float, float]:
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
    transposed = where.transposed or _concrete(concrete, where.transposed_at) == "True"
    stride = _per_dim(concrete, where.stride, spatial) or [1] * spatial
    dilation = _per_dim(concrete, where.dilation, spatial) or [1] * spatial
    padding = _per_dim(concrete, where.padding, spatial)  # a str padding is recorded as ''
    pads: list[int | None] = [None] * spatial if padding is None else [*padding]
    extra = _per_dim(concrete, where.output_padding, spatial) or [0] * spatial
    out = list(map(_out_size, sizes, kernel, stride, pads, dilation, extra, [transposed] * spatial))
    groups = (_concrete_ints(concrete, where.groups) or [1])[0]
    channels = ws[1] * max(1, groups) if transposed else ws[0]
    flops = 2.0 * batch * numel(ws) * numel(sizes if transposed else out)
    written = batch * channels * numel(out) * DTYPE_BYTES[x[1]]
    return flops, float(sum(map(_size, args)) + written)


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


def _per_dim(concrete: list[Any], index: int, spatial: int) -> list[int] | None:
    """A per-dimension list argument (one value stands for all); None when not recorded."""
    values = _concrete_ints(concrete, index)
    if len(values) == 1:
        return values * spatial
    return values if len(values) == spatial else None


def _conv_backward(
    mask_at: int, transposed_at: int, args: list[_Tensor | None], concrete: list[Any]
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
    flags = _FLAGS.findall(_concrete(concrete, mask_at))
    mask = [f == "True" for f in flags] if len(flags) == 3 else [True, True, False]
    transposed = _concrete(concrete, transposed_at) == "True"
    positions = numel((x if transposed else g)[0][-spatial:])
    forward = 2.0 * numel(g[0][: -spatial - 1]) * numel(w[0]) * positions
    flops = forward * (mask[0] + mask[1])
    bias = g[0][-spatial - 1] * DTYPE_BYTES[g[1]] if mask[2] else 0
    # grad input reads the weight and writes the input's size, grad weight the other way round
    moved = _size(g) + (_size(w) + _size(x)) * (mask[0] + mask[1]) + bias
    return flops, float(moved)


def _attention(
    where: _Attention, args: list[_Tensor | None], concrete: list[Any]
) -> tuple[float, float]:
    """Attention over q (…, Hq, Sq, D) and k, v (…, Hk, Sk, D / Dv), Hk ≤ Hq (GQA):
    forward 2·B·Hq·Sq·Sk·(D + Dv) (QKᵀ and PV); backward 2·B·Hq·Sq·Sk·(3·D + 2·Dv) (QKᵀ
    again, then dV, dP, dQ, dK: 2.5x the forward); halved where causal. Packed
    variable-length batches count Sk as the longest key sequence: a bound. Forward reads q,
    k, v (and a mask) and writes out; backward reads grad_out, q, k, v, out and writes the
    grads of q, k, v."""
    first = 1 if where.backward else 0
    q, k, v = args[first], args[first + 1], args[first + 2]
    if q is None or k is None or v is None:
        raise ValueError("attention without q, k or v")
    qs, ks, vs = q[0], k[0], v[0]
    packed = _at(args, where.cum_seq_q) is not None
    if where.bshd or (packed and len(qs) == 3):  # (B, S, H, D), or (total, H, D) when packed
        rows, sq, sk = numel(qs[:-3]) * qs[-2], qs[-3], ks[-3]
    else:
        rows, sq, sk = numel(qs[:-2]), qs[-2], ks[-2]
    if packed:
        longest = _concrete_ints(concrete, where.max_k)
        sk = min(sk, longest[0]) if len(longest) == 1 else sk
    d, dv = qs[-1], vs[-1]
    flops = 2.0 * rows * sq * sk * ((3 * d + 2 * dv) if where.backward else (d + dv))
    flag = _concrete(concrete, where.causal)
    if flag == "True" or (where.mask_type and flag not in ("", "0")):
        flops /= 2
    qkv = _size(q) + _size(k) + _size(v)
    if where.backward:
        moved = _size(args[0]) + 2 * qkv + _size(_at(args, where.out))
    else:
        moved = qkv + rows * sq * dv * DTYPE_BYTES[q[1]]
    return flops, float(moved + _size(_at(args, where.bias)))


def matmul_dtype(inputs: OpInputs, name: str | None = None) -> str | None:
    """The dtype of a matmul's left factor (named: else its first tensor input)."""
    where = _PRODUCTS.get(name or "")
    if where is not None:
        args = _by_position(inputs) or []
        a = _at(args, where.a)
        if a is not None:
            return a[1]
    t = _tensors(inputs)
    return t[0][1] if t else None


class OpCost(NamedTuple):
    """What one call of an op costs: ``flops_of``, ``bytes_of`` and, for matmuls,
    ``matmul_dtype``."""

    flops: float
    bytes: float
    dtype: str | None


class _Shapes(msgspec.Struct, gc=False):
    """The args that an op's FLOPs and bytes depend on, undecoded: the memo key."""

    dims: msgspec.Raw = msgspec.field(default=_ABSENT, name="Input Dims")
    types: msgspec.Raw = msgspec.field(default=_ABSENT, name="Input type")


class _ConcreteShapes(_Shapes, gc=False):
    """Those of an op of BY_CONCRETE, whose costs also depend on ``Concrete Inputs``."""

    concrete: msgspec.Raw = msgspec.field(default=_ABSENT, name="Concrete Inputs")


_SHAPES = msgspec.json.Decoder(_Shapes)
_CONCRETE_SHAPES = msgspec.json.Decoder(_ConcreteShapes)
_MANY_SHAPES = msgspec.json.Decoder(list[_ConcreteShapes])


class OpCosts:
    """``OpCost`` of ops, worked out once per distinct signature: the op's name and the raw
    JSON of its ``Input Dims``, ``Input type`` (and, for ops of BY_CONCRETE, ``Concrete
    Inputs``), all that the costs depend on. The ops of a trace repeat a few signatures per
    step; their other args (``External id``, ``Ev Idx`` ...) differ. Keep one per trace or
    analysis."""

    def __init__(self) -> None:
        self._memo: dict[bytes, OpCost] = {}

    def __call__(self, op: Op) -> OpCost:
        name = op.name
        try:
            if name in BY_CONCRETE:
                key = _concrete_key(_CONCRETE_SHAPES.decode(op.args), name)
            else:
                shapes = _SHAPES.decode(op.args)
                key = _SEPARATOR.join((shapes.dims, shapes.types, _ENCODE(name)))
        except msgspec.MsgspecError:
            return _cost(op)  # args that are not a JSON object: nothing to key on
        cost = self._memo.get(key)
        if cost is None:
            cost = self._memo[key] = _cost(op)
        return cost

    def signatures(self, ops: list[Op]) -> list[bytes] | None:
        """Each op's signature, all that its costs depend on (its name and the raw JSON of
        its shapes, dtypes and, for BY_CONCRETE, Concrete Inputs): one decode for all. None
        when an op's args are malformed."""
        try:  # all args as one JSON array: one call into the decoder
            all_shapes = _MANY_SHAPES.decode(b"[%b]" % b",".join([op.args for op in ops]))
        except msgspec.MsgspecError:
            return None
        names = list(map(_NAME, ops))
        dims, types = map(_DIMS, all_shapes), map(_TYPES, all_shapes)
        keys = list(map(_SEPARATOR.join, zip(dims, types, map(_ENCODE, names), strict=True)))
        if not BY_CONCRETE.isdisjoint(names):
            for i in compress(range(len(names)), map(BY_CONCRETE.__contains__, names)):
                keys[i] = _concrete_key(all_shapes[i], names[i])
        return keys

    def many(self, ops: list[Op]) -> list[OpCost]:
        """``OpCost`` of each op, as calling this on each gives: one decode for all, and no
        Python code run per op but for those of BY_CONCRETE."""
        keys = self.signatures(ops)
        if keys is None:
            return [self(op) for op in ops]  # one op's args are malformed: find which
        memo = self._memo
        for key, op in dict(zip(keys, ops, strict=True)).items():  # one op of each signature
            if key not in memo:
                memo[key] = _cost(op)
        return list(map(memo.__getitem__, keys))


def _concrete_key(shapes: _ConcreteShapes, name: str) -> bytes:
    """The memo key of an op of BY_CONCRETE. Keys are the raw JSON values (which hold no NUL
    and start with no \\x01) and the name, NUL-separated: they are told apart."""
    return _CONCRETE_MARK + _SEPARATOR.join(
        (shapes.dims, shapes.types, shapes.concrete, _ENCODE(name))
    )


def _cost(op: Op) -> OpCost:
    inputs = op.inputs()
    name = op.name
    concrete = concrete_inputs(op) if name in BY_CONCRETE else []
    flops = op_flops(name, inputs, concrete) if name in FLOP_OPS else 0.0
    dtype = matmul_dtype(inputs, name) if name in MATMULS else None
    return OpCost(flops, op_bytes(name, inputs, concrete), dtype)
