"""FLOPs and bytes of an op, from the shapes and dtypes Kineto records (`record_shapes=True`).

FLOPs are counted for matrix products, convolutions and attention (2 per multiply-add);
bytes are each input read once and the output written once, the output's size estimated
from the op's kind: the product's shape for matrix products, nothing for reductions, the
largest input for everything else (elementwise ops and copies).
"""

from __future__ import annotations

import math
import re
from operator import attrgetter, methodcaller
from typing import Any, NamedTuple, cast

import msgspec

from kernelscope.trace_model import Op, OpInputs

DTYPE_BYTES = {
    "double": 8,
    "float": 4,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "long int": 8,
    "int": 4,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
}
MATMULS = frozenset(
    {
        "aten::mm",
        "aten::addmm",
        "aten::bmm",
        "aten::baddbmm",
        "aten::matmul",
        "aten::linear",
        "aten::_scaled_mm",
    }
)
CONVOLUTIONS = frozenset(
    {
        "aten::convolution",
        "aten::_convolution",
        "aten::conv1d",
        "aten::conv2d",
        "aten::conv3d",
        "aten::cudnn_convolution",
    }
)
ATTENTION = frozenset(
    {
        "aten::scaled_dot_product_attention",
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_cudnn_attention",
        "aten::_flash_attention_forward",
        "aten::_efficient_attention_forward",
    }
)
FLOP_OPS = MATMULS | CONVOLUTIONS | ATTENTION
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
_MAX_NUMEL = 2**62  # more elements than any memory holds: a corrupt shape
_ABSENT = msgspec.Raw(b"")  # not valid JSON: no field's raw text equals it
_SEPARATOR = b"\0"  # nor does any hold a NUL byte: joined, they are told apart
_CONV_MARK = b"\x01"  # nor start with this
_ENCODE = methodcaller("encode", "utf-8", "surrogatepass")  # any str, one to one
_NAME = attrgetter("name")
_DIMS = attrgetter("dims")
_TYPES = attrgetter("types")


def numel(dims: list[int]) -> int:
    """Elements of a shape ([] is a scalar: 1)."""
    return math.prod(dims) if dims else 1


def _tensors(inputs: OpInputs) -> list[tuple[list[int], str]]:
    """(shape, dtype) of each tensor input; scalars, lists and Nones left out. None at all
    when a tensor's shape is impossible (a negative size, more than 2⁶² elements): the
    op's shapes are corrupt, and its FLOPs and bytes unknown."""
    out: list[tuple[list[int], str]] = []
    for dims, dtype in zip(inputs.dims, inputs.types, strict=False):
        if dtype in DTYPE_BYTES and isinstance(dims, list):
            shape = cast(list[object], dims)
            if all(type(d) is int for d in shape):
                sizes = cast(list[int], shape)
                if not _possible(sizes):
                    return []
                out.append((sizes, dtype))
    return out


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


class _Concrete(msgspec.Struct):
    values: list[Any] = msgspec.field(default_factory=list[Any], name="Concrete Inputs")


_CONCRETE = msgspec.json.Decoder(_Concrete)


def concrete_inputs(op: Op) -> list[Any]:
    """The op's ``Concrete Inputs`` (scalar arguments as strings); empty when absent."""
    try:
        return _CONCRETE.decode(op.args).values
    except msgspec.MsgspecError:
        return []


def flops_of(op: Op) -> float:
    """FLOPs of one recorded call of `op`."""
    if op.name not in FLOP_OPS:
        return 0.0
    return op_flops(op.name, op.inputs(), concrete_inputs(op) if op.name in CONVOLUTIONS else [])


def op_flops(name: str, inputs: OpInputs, concrete: list[Any] | None = None) -> float:
    """Floating-point operations of one call; 0 when the op or its shapes are not known."""
    t = _tensors(inputs)
    try:
        if name in ("aten::mm", "aten::_scaled_mm") and len(t) >= 2:
            (m, k), (_, n) = t[0][0][-2:], t[1][0][-2:]
            return 2.0 * m * k * n
        if name == "aten::addmm" and len(t) >= 3:
            (m, k), (_, n) = t[1][0][-2:], t[2][0][-2:]
            return 2.0 * m * k * n
        if name in ("aten::bmm", "aten::matmul") and len(t) >= 2:
            a, b = t[0][0], t[1][0]
            if len(a) == 1 or len(b) == 1:
                return 2.0 * numel(a) * (b[-1] if len(b) > 1 else 1)
            batch = max(numel(a[:-2]), numel(b[:-2]))
            return 2.0 * batch * a[-2] * a[-1] * b[-1]
        if name == "aten::baddbmm" and len(t) >= 3:
            a, b = t[1][0], t[2][0]
            return 2.0 * a[0] * a[1] * a[2] * b[2]
        if name == "aten::linear" and len(t) >= 2:
            x, w = t[0][0], t[1][0]
            return 2.0 * numel(x[:-1]) * x[-1] * w[0]
        if name in CONVOLUTIONS and len(t) >= 2:
            return _conv_flops(t[0][0], t[1][0], concrete or [])
        if name in ATTENTION and len(t) >= 3:
            q, k = t[0][0], t[1][0]
            return 4.0 * numel(q[:-2]) * q[-2] * k[-2] * q[-1]
    except (IndexError, ValueError, OverflowError):
        return 0.0
    return 0.0


def _conv_flops(x: list[int], w: list[int], concrete: list[Any]) -> float:
    """2 · N · C_out · C_in/groups · kernel · output positions; stride from Concrete Inputs."""
    spatial = len(w) - 2
    strides = _concrete_ints(concrete, 3) or [1] * spatial
    out_positions = 1
    for i in range(spatial):
        stride = max(1, strides[i]) if i < len(strides) else 1
        out_positions *= max(1, x[2 + i] // stride)
    return 2.0 * x[0] * w[0] * numel(w[1:]) * out_positions


def _concrete_ints(values: list[Any], index: int) -> list[int]:
    if index < len(values) and isinstance(values[index], str):
        return [int(v) for v in _INTS.findall(str(values[index]))]
    return []


def op_bytes(name: str, inputs: OpInputs) -> float:
    """Bytes one call moves through memory: inputs read once, the output written once."""
    t = _tensors(inputs)
    if not t:
        return 0.0
    read = sum(numel(d) * DTYPE_BYTES[dt] for d, dt in t)
    size = DTYPE_BYTES[t[0][1]]
    if name in MATMULS and len(t) >= 2:
        a, b = (
            (t[1][0], t[2][0])
            if name in ("aten::addmm", "aten::baddbmm") and len(t) >= 3
            else (t[0][0], t[1][0])
        )
        written = numel(a[:-1]) * (b[-1] if len(b) > 1 else 1) * size
    elif name in REDUCTIONS:
        written = 0
    else:
        written = max(numel(d) * DTYPE_BYTES[dt] for d, dt in t)
    return float(read + written)


def matmul_dtype(inputs: OpInputs) -> str | None:
    """The dtype of a matmul's first tensor input."""
    t = _tensors(inputs)
    return t[0][1] if t else None


class OpCost(NamedTuple):
    """What one call of an op costs: ``flops_of``, ``op_bytes`` and, for matmuls,
    ``matmul_dtype``."""

    flops: float
    bytes: float
    dtype: str | None


class _Shapes(msgspec.Struct, gc=False):
    """The args that an op's FLOPs and bytes depend on, undecoded: the memo key."""

    dims: msgspec.Raw = msgspec.field(default=_ABSENT, name="Input Dims")
    types: msgspec.Raw = msgspec.field(default=_ABSENT, name="Input type")


class _ConvShapes(_Shapes, gc=False):
    """A convolution's, whose FLOPs also depend on the strides in ``Concrete Inputs``."""

    concrete: msgspec.Raw = msgspec.field(default=_ABSENT, name="Concrete Inputs")


_SHAPES = msgspec.json.Decoder(_Shapes)
_CONV_SHAPES = msgspec.json.Decoder(_ConvShapes)
_MANY_SHAPES = msgspec.json.Decoder(list[_ConvShapes])


class OpCosts:
    """``OpCost`` of ops, worked out once per distinct signature: the op's name and the raw
    JSON of its ``Input Dims``, ``Input type`` (and, for convolutions, ``Concrete Inputs``),
    all that the costs depend on. The ops of a trace repeat a few signatures per step; their
    other args (``External id``, ``Ev Idx`` ...) differ. Keep one per trace or analysis."""

    def __init__(self) -> None:
        self._memo: dict[bytes, OpCost] = {}

    def __call__(self, op: Op) -> OpCost:
        name = op.name
        try:
            if name in CONVOLUTIONS:
                key = _conv_key(_CONV_SHAPES.decode(op.args), name)
            else:
                shapes = _SHAPES.decode(op.args)
                key = _SEPARATOR.join((shapes.dims, shapes.types, _ENCODE(name)))
        except msgspec.MsgspecError:
            return _cost(op)  # args that are not a JSON object: nothing to key on
        cost = self._memo.get(key)
        if cost is None:
            cost = self._memo[key] = _cost(op)
        return cost

    def many(self, ops: list[Op]) -> list[OpCost]:
        """``OpCost`` of each op, as calling this on each gives: one decode for all, and no
        Python code run per op but for convolutions."""
        try:  # all args as one JSON array: one call into the decoder
            all_shapes = _MANY_SHAPES.decode(b"[%b]" % b",".join([op.args for op in ops]))
        except msgspec.MsgspecError:
            return [self(op) for op in ops]  # one op's args are malformed: find which
        names = list(map(_NAME, ops))
        dims, types = map(_DIMS, all_shapes), map(_TYPES, all_shapes)
        keys = list(map(_SEPARATOR.join, zip(dims, types, map(_ENCODE, names), strict=True)))
        if not CONVOLUTIONS.isdisjoint(names):
            for i, name in enumerate(names):
                if name in CONVOLUTIONS:
                    keys[i] = _conv_key(all_shapes[i], name)
        memo = self._memo
        for key, op in dict(zip(keys, ops, strict=True)).items():  # one op of each signature
            if key not in memo:
                memo[key] = _cost(op)
        return list(map(memo.__getitem__, keys))


def _conv_key(shapes: _ConvShapes, name: str) -> bytes:
    """The memo key of a convolution. Keys are the raw JSON values (which hold no NUL and
    start with no \\x01) and the name, NUL-separated: they are told apart."""
    return _CONV_MARK + _SEPARATOR.join((shapes.dims, shapes.types, shapes.concrete, _ENCODE(name)))


def _cost(op: Op) -> OpCost:
    inputs = op.inputs()
    name = op.name
    flops = (
        op_flops(name, inputs, concrete_inputs(op) if name in CONVOLUTIONS else [])
        if name in FLOP_OPS
        else 0.0
    )
    dtype = matmul_dtype(inputs) if name in MATMULS else None
    return OpCost(flops, op_bytes(name, inputs), dtype)
