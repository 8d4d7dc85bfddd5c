"""Elementwise ops and reductions: no FLOPs counted; each input's memory read once (an
expanded, stride-0 dimension once: ``mean``'s backward divides a scalar expanded to the
input's shape, 4 B read, not the shape's size) and the output written once (nothing for a
reduction, the largest input for the rest).
"""

from __future__ import annotations

from typing import Any

from kernelscope.analysis.costs.movement import distinct_elements, int_strides
from kernelscope.analysis.costs.tensors import DTYPE_BYTES, Tensor, size_of

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
    generated = name.startswith(GENERATED_KERNEL_PREFIX)
    written = 0 if name in REDUCTIONS or generated else max(map(size_of, args))
    return float(read + written)


def elementwise_footprint(name: str, args: list[Tensor], held: list[int] | None = None) -> float:
    """Distinct bytes one call touches: its bytes, but an in-place op (``add_``) writes a
    tensor it also reads, counted once."""
    if name.endswith("_") and args and not name.startswith(GENERATED_KERNEL_PREFIX):
        return float(_read(args, held))
    return elementwise_bytes(name, args, held)


def _read(args: list[Tensor], held: list[int] | None) -> int:
    """Bytes the arguments' memory holds: `held` where it has one per argument, else their sizes."""
    return sum(held) if held is not None and len(held) == len(args) else sum(map(size_of, args))
