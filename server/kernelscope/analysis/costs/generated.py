"""Kernels Inductor generated (``triton_poi_…``, ``triton_red_…``, ``triton_tem_…``): Inductor's
own estimate where its record carries one, else FLOPs from the matrix product a template
fused.

Compiled with ``config.benchmark_kernel`` (the worker asks for it), Inductor writes
``kernel_flop`` and ``kernel_num_gb`` on each kernel's profiler record. Its bytes count a
sliced buffer by the slices read and a broadcast one by its storage, which the buffers'
shapes in the trace cannot tell; its FLOPs are those of the ops it fused (FlopCounter's).
"""

from __future__ import annotations

import math

import msgspec

from kernelscope.analysis.costs.attention import TEMPLATE_KERNEL_PREFIX
from kernelscope.analysis.costs.tensors import Tensor

#: Ops a template kernel's name lists (``triton_tem_fused_addmm_relu_0``) that make it a
#: matrix product.
MATMUL_TOKENS = frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul"})


class _InductorEstimate(msgspec.Struct, gc=False):
    """The two fields Inductor adds to a kernel's record under ``benchmark_kernel``."""

    flop: float | None = msgspec.field(default=None, name="kernel_flop")
    num_gb: float | None = msgspec.field(default=None, name="kernel_num_gb")


_ESTIMATE = msgspec.json.Decoder(_InductorEstimate)


def inductor_estimate(args: bytes) -> tuple[float, float] | None:
    """(FLOPs, bytes) that Inductor estimated for one launch of its kernel, from the record's
    raw args; None when the record holds neither (compiled without ``benchmark_kernel``)."""
    try:
        found = _ESTIMATE.decode(args)
    except msgspec.MsgspecError:
        return None
    if found.flop is None and found.num_gb is None:
        return None
    flops = found.flop if found.flop is not None and math.isfinite(found.flop) else 0.0
    gb = found.num_gb if found.num_gb is not None and math.isfinite(found.num_gb) else 0.0
    return max(flops, 0.0), max(gb * 1e9, 0.0)


def fused_ops(name: str) -> frozenset[str]:
    """The ops an Inductor kernel's name says it fused: ``triton_tem_fused_addmm_relu_0`` →
    {addmm, relu}."""
    fused = name.partition("_fused_")[2]
    return frozenset(t for t in fused.split("_") if t and not t.isdigit())


def is_template_matmul(name: str) -> bool:
    """Whether a kernel is an Inductor template of a matrix product (max-autotune's GEMMs)."""
    return name.startswith(TEMPLATE_KERNEL_PREFIX) and not MATMUL_TOKENS.isdisjoint(fused_ops(name))


def template_matmul_flops(name: str, args: list[Tensor]) -> float:
    """FLOPs of a matrix-product template from the buffers it was passed: A (…, M, K) and B
    next to it, (…, K, N) or, as a linear layer's weight is passed untransposed, (…, N, K),
    with an output (…, M, N) among the other buffers: 2·M·N·K per batch entry (both products
    of an ``mm_plus_mm``). 0 when the name fused no product or no such pair is found."""
    if not is_template_matmul(name):
        return 0.0
    shapes = [s for s, _ in args]
    pairs = 2 if "mm_plus_mm" in name.partition("_fused_")[2] else 1
    flops, i = 0.0, 0
    while i < len(shapes) - 1 and pairs:
        product = _product(shapes[i], shapes[i + 1], shapes[:i] + shapes[i + 2 :])
        if product:
            flops, pairs, i = flops + product, pairs - 1, i + 2
        else:
            i += 1
    return flops


def _product(a: list[int], b: list[int], rest: list[list[int]]) -> float:
    """2·M·N·K of A @ B, B given as (…, K, N) or (…, N, K), if ``rest`` holds its output."""
    if not (2 <= len(a) <= 3 and len(a) == len(b)) or a[:-2] != b[:-2]:
        return 0.0
    m, k = a[-2], a[-1]
    for n, inner in ((b[-1], b[-2]), (b[-2], b[-1])):
        if inner == k and [*a[:-2], m, n] in rest:
            return 2.0 * math.prod(a[:-2]) * m * n * k
    return 0.0
