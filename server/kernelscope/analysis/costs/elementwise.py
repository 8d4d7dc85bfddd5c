"""Elementwise ops and reductions: no FLOPs counted; each input read once and the output
written once (nothing for a reduction, the largest input for the rest).
"""

from __future__ import annotations

from kernelscope.analysis.costs.tensors import Tensor, size_of

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


def elementwise_bytes(name: str, args: list[Tensor]) -> float:
    """Each tensor argument read once and the output written once: nothing for a reduction,
    the largest argument's size for the rest."""
    if not args:
        return 0.0
    read = sum(map(size_of, args))
    # an Inductor-generated Triton kernel is recorded with its output buffers among its
    # arguments: each is read or written once
    generated = name.startswith(GENERATED_KERNEL_PREFIX)
    written = 0 if name in REDUCTIONS or generated else max(map(size_of, args))
    return float(read + written)
