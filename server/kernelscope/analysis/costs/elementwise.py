"""Elementwise ops and reductions: no FLOPs counted; each input's memory read once (an
expanded, stride-0 dimension once: ``mean``'s backward divides a scalar expanded to the
input's shape, 4 B read, not the shape's size) and the output written once: nothing for a
reduction, ``self`` for an in-place op, the largest input's elements in the dtype the inputs
promote to for arithmetic that promotes (PROMOTING; ``bool`` for a comparison), else the
largest input (a batch norm writes its input's dtype, whatever its fp32 weights). Under
autocast a bf16 activation plus an fp32 bias writes fp32: BART's logits plus
``final_logits_bias`` (8x128x50,265 + 50,265) moved 309.1 MB under Nsight Compute on an H100,
309.0 modelled, where the largest input's dtype had said 206.1.
"""

from __future__ import annotations

from typing import Any

from kernelscope.analysis.costs.movement import distinct_elements, int_strides
from kernelscope.analysis.costs.tensors import DTYPE_BYTES, Tensor, numel, size_of

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


GENERATED_KERNEL_PREFIX = ("triton_",)

#: Ops whose output is ``bool`` whatever their inputs.
BOOL_RESULTS = frozenset(
    f"aten::{name}"
    for name in (
        "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
        "logical_not", "isnan", "isinf", "isfinite", "isposinf", "isneginf", "signbit",
    )
)  # fmt: skip
#: Arithmetic whose output takes the dtype its tensor inputs promote to.
PROMOTING = frozenset(
    f"aten::{name}"
    for name in (
        "add", "sub", "rsub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod",
        "pow", "maximum", "minimum", "fmax", "fmin", "atan2", "hypot", "copysign", "where",
        "lerp", "addcmul", "addcdiv", "bitwise_and", "bitwise_or", "bitwise_xor",
    )
)  # fmt: skip
#: Integer inputs give a floating result.
TRUE_DIVISION = frozenset({"aten::div", "aten::true_divide", "aten::atan2"})
_FLOATING, _COMPLEX = 2, 3
_DEFAULT_WIDTH = {1: 8, 2: 4, 3: 8}  # int64, fp32, complex64
_FLOATS = {"double": 8, "float": 4, "c10::Half": 2, "c10::BFloat16": 2}


#: ATen ops whose traffic depends on the data (how many elements an index or a mask picks):
#: no model; the generic rule is a guess for them.
DATA_DEPENDENT = frozenset(
    f"aten::{name}"
    for name in (
        "index",
        "index_put_",
        "_index_put_impl_",
        "nonzero",
        "masked_select",
        "masked_scatter_",
        "unique",
        "_unique",
        "_unique2",
        "unique_consecutive",
        "unique_dim",
        "bincount",
        "histc",
    )
)


def held_bytes(args: list[Tensor | None], strides: list[Any]) -> list[int]:
    """Bytes each tensor argument's memory holds (``Input Strides`` as recorded: a stride-0
    dimension once), in the order of the tensors among `args`."""
    held: list[int] = []
    for i, arg in enumerate(args):
        if arg is not None:
            at = int_strides(strides[i]) if i < len(strides) else None
            held.append(distinct_elements(arg[0], at) * DTYPE_BYTES[arg[1]])
    return held


def elementwise_bytes(name: str, args: list[Tensor], held: list[int] | None = None) -> float:
    """Each tensor argument read once (`held`: the bytes its memory holds, as held_bytes
    says; its size where not given) and the output written once: nothing for a reduction,
    the largest argument's size for the rest."""
    if not args:
        return 0.0
    read = _read(args, held)
    # an Inductor-generated Triton kernel is recorded with its output buffers among its
    # arguments: each is read or written once
    if name in REDUCTIONS or name.startswith(GENERATED_KERNEL_PREFIX):
        return float(read)
    if name.endswith("_"):  # in place: written into self, in its dtype
        return float(read + size_of(args[0]))
    if name not in PROMOTING and name not in BOOL_RESULTS:
        return float(read + max(map(size_of, args)))
    width = 1 if name in BOOL_RESULTS else result_width(name, args)
    return float(read + broadcast_numel([shape for shape, _ in args]) * width)


def broadcast_numel(shapes: list[list[int]]) -> int:
    """Elements of the shapes broadcast together (``[4096, 1]`` with ``[1, 4096]``: 4096²);
    the largest shape's where they do not broadcast (a shape the trace got wrong)."""
    rank = max(map(len, shapes), default=0)
    out = [1] * rank
    for shape in shapes:
        for i, size in enumerate(shape, rank - len(shape)):
            if size != 1 and out[i] not in (1, size):
                return max(map(numel, shapes))
            out[i] = size if size != 1 else out[i]
    return numel(out)


def result_width(name: str, args: list[Tensor]) -> int:
    """Bytes per element of the dtype the tensors promote to, as torch promotes: by kind
    (bool < integer < floating < complex), the highest kind among the tensors with
    dimensions at its widest (fp32 for fp16 with bf16; a complex at least twice the widest
    float); a 0-d tensor of a higher kind gives that kind's default (int64, fp32, complex64:
    the trace records a Python scalar as a 0-d ``double``). ``where`` leaves its condition
    out; true division and ``atan2`` of integers give fp32."""
    if name == "aten::where" and len(args) == 3:
        args = args[1:]
    dims = [dtype for shape, dtype in args if shape] or [dtype for _, dtype in args]
    kind = max(_kind(d) for d in dims)
    scalar = max((_kind(d) for shape, d in args if not shape), default=-1)
    if scalar > kind:
        return _DEFAULT_WIDTH[scalar]
    if kind < _FLOATING and name in TRUE_DIVISION:
        return 4
    top = {d for d in dims if _kind(d) == kind}
    if top == {"c10::Half", "c10::BFloat16"}:
        return 4
    floats = [DTYPE_BYTES[d] for d in dims if _kind(d) == _FLOATING]
    doubled = 2 * max(floats, default=0) if kind == _COMPLEX else 0
    return max(*(DTYPE_BYTES[d] for d in top), doubled)


def _kind(dtype: str) -> int:
    if dtype == "bool":
        return 0
    if dtype.startswith("c10::complex"):
        return _COMPLEX
    return _FLOATING if dtype in _FLOATS or dtype.startswith("c10::Float") else 1


def elementwise_footprint(name: str, args: list[Tensor], held: list[int] | None = None) -> float:
    """Distinct bytes one call touches: its bytes, but an in-place op (``add_``) writes a
    tensor it also reads, counted once."""
    if name.endswith("_") and args and not name.startswith(GENERATED_KERNEL_PREFIX):
        return float(_read(args, held))
    return elementwise_bytes(name, args, held)


def _read(args: list[Tensor], held: list[int] | None) -> int:
    """Bytes the arguments' memory holds: `held` where it has one per argument, else their sizes."""
    return sum(held) if held is not None and len(held) == len(args) else sum(map(size_of, args))
