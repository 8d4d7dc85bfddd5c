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
    elements = max(numel(shape) for shape, _ in args)
    width = 1 if name in BOOL_RESULTS else result_width(args)
    return float(read + elements * width)


def result_width(args: list[Tensor]) -> int:
    """Bytes per element of the dtype tensors promote to: among those with dimensions (a
    0-d tensor does not promote within its kind), a floating dtype over an integral one,
    the widest, and fp32 for fp16 with bf16."""
    dims = [dtype for shape, dtype in args if shape] or [dtype for _, dtype in args]
    floats = {d for d in dims if d in _FLOATS}
    if floats == {"c10::Half", "c10::BFloat16"}:
        return 4
    if floats:
        return max(_FLOATS[d] for d in floats)
    return max(DTYPE_BYTES[d] for d in dims)


def elementwise_footprint(name: str, args: list[Tensor], held: list[int] | None = None) -> float:
    """Distinct bytes one call touches: its bytes, but an in-place op (``add_``) writes a
    tensor it also reads, counted once."""
    if name.endswith("_") and args and not name.startswith(GENERATED_KERNEL_PREFIX):
        return float(_read(args, held))
    return elementwise_bytes(name, args, held)


def _read(args: list[Tensor], held: list[int] | None) -> int:
    """Bytes the arguments' memory holds: `held` where it has one per argument, else their sizes."""
    return sum(held) if held is not None and len(held) == len(args) else sum(map(size_of, args))
