"""Matrix and matrix-vector products (GEMM, GEMV, dot): FLOPs 2·M·K·N, bytes the operands
read once and the product written once.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kernelscope.analysis.costs.tensors import (
    DTYPE_BYTES,
    SCALAR_TYPE_BYTES,
    Tensor,
    arg_at,
    by_position,
    concrete_ints,
    concrete_number,
    numel,
    size_of,
    tensors,
)
from kernelscope.analysis.trace_model import OpInputs


class _Operands(NamedTuple):
    """Where a product's operands are: the left and right factors and the tensor added
    (``self`` of addmm, scaled by ``beta`` at Concrete Inputs 3; -1: none); ``out_dtype``:
    the Concrete Inputs position of an output dtype (-1: the left factor's dtype)."""

    a: int
    b: int
    added: int = -1
    out_dtype: int = -1


PRODUCTS = {
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
MATMULS = frozenset(PRODUCTS) - MATVECS


def product_costs(
    name: str, args: list[Tensor | None], concrete: list[Any]
) -> tuple[float, float] | None:
    """A matrix or matrix-vector product: 2·M·K·N (batched and broadcast as torch.matmul
    does); every tensor argument read (the added one not where beta is 0), the product
    written."""
    where = PRODUCTS[name]
    a, b = arg_at(args, where.a), arg_at(args, where.b)
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
    read = sum(map(size_of, args))
    if where.added >= 0 and concrete_number(concrete, 3) == 0:
        read -= size_of(arg_at(args, where.added))  # beta = 0: torch does not read it
    out_size = DTYPE_BYTES[a[1]]
    if where.out_dtype >= 0:
        dtype = concrete_ints(concrete, where.out_dtype)
        if len(dtype) == 1:
            out_size = SCALAR_TYPE_BYTES.get(dtype[0], out_size)
    return flops, float(read + numel(out) * out_size)


def _broadcast(a: list[int], b: list[int]) -> list[int]:
    """The broadcast of two batch shapes."""
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
    return [max(p, q) if 1 in (p, q) else p for p, q in zip(a, b, strict=True)]


def matmul_dtype(inputs: OpInputs, name: str | None = None) -> str | None:
    """The dtype of a matmul's left factor (named: else its first tensor input)."""
    where = PRODUCTS.get(name or "")
    if where is not None:
        args = by_position(inputs) or []
        a = arg_at(args, where.a)
        if a is not None:
            return a[1]
    t = tensors(inputs)
    return t[0][1] if t else None
