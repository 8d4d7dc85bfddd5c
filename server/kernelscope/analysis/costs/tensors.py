"""The tensors and scalar arguments of a recorded op call (``record_shapes=True``: ``Input
Dims``, ``Input type``, ``Concrete Inputs``), read at their positions in the op's ATen signature.
"""

from __future__ import annotations

import math
import re
from typing import Any, cast

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
_INTS = re.compile(r"-?\d+")
FLAGS = re.compile(r"True|False")
_MAX_NUMEL = 2**62  # more elements than any memory holds: a corrupt shape

Tensor = tuple[list[int], str]  # (shape, dtype)


def numel(dims: list[int]) -> int:
    """Elements of a shape ([] is a scalar: 1)."""
    return math.prod(dims) if dims else 1


def by_position(inputs: OpInputs) -> list[Tensor | None] | None:
    """(shape, dtype) of each argument that is a tensor, None for the others (scalars, lists,
    Nones). None for all when a tensor's shape is impossible (a negative size, more than 2⁶²
    elements): the op's shapes are corrupt, and its FLOPs and bytes unknown."""
    out: list[Tensor | None] = []
    for dims, dtype in zip(inputs.dims, inputs.types, strict=False):
        tensor: Tensor | None = None
        if dtype in DTYPE_BYTES and isinstance(dims, list):
            shape = cast(list[object], dims)
            if all(type(d) is int for d in shape):
                sizes = cast(list[int], shape)
                if not _possible(sizes):
                    return None
                tensor = (sizes, dtype)
        out.append(tensor)
    return out


def tensors(inputs: OpInputs) -> list[Tensor]:
    """(shape, dtype) of each tensor input; none at all when a shape is corrupt."""
    return [t for t in by_position(inputs) or [] if t is not None]


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


def arg_at(args: list[Tensor | None], index: int) -> Tensor | None:
    return args[index] if 0 <= index < len(args) else None


def size_of(tensor: Tensor | None) -> int:
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


def concrete_value(values: list[Any], index: int) -> str:
    """The Concrete Inputs value at ``index``; '' when absent."""
    value = values[index] if 0 <= index < len(values) else ""
    return value if isinstance(value, str) else ""


def concrete_ints(values: list[Any], index: int) -> list[int]:
    return [int(v) for v in _INTS.findall(concrete_value(values, index))]


def concrete_per_dim(values: list[Any], index: int, spatial: int) -> list[int] | None:
    """A per-dimension list argument (one value stands for all); None when not recorded."""
    ints = concrete_ints(values, index)
    if len(ints) == 1:
        return ints * spatial
    return ints if len(ints) == spatial else None


def concrete_number(values: list[Any], index: int) -> float | None:
    try:
        return float(concrete_value(values, index))
    except ValueError:
        return None
