"""Ops over a list of tensors (``torch.cat``), whose element type the trace leaves out: their
``Input type`` is ``TensorList``, with each tensor's shape in ``Input Dims`` but no dtype.
ATen's concatenation kernels are templated on the element's width in bytes
(``CatArrayBatchedCopy<OpaqueType<2u>, …>``), so the row's kernel says it. Where the inputs
are not contiguous (ViT's class token, expanded, beside permuted patches) cat copies each
input into its slice of the result with ``direct_copy_kernel_cuda``, whose lambda names the
element type (``{lambda(float)#1}``).

A concatenation reads each listed tensor's distinct elements once (an expanded, stride-0
dimension once) and writes the result (Nsight Compute on the H200, Qwen2's decode step: its
cat row read and wrote 16.9 MB a step, unmodelled until then: docs/h200-run/fifth/counters.txt).
"""

from __future__ import annotations

import re
from typing import Any, cast

from kernelscope.analysis.costs.movement import distinct_elements, int_strides
from kernelscope.analysis.costs.tensors import DTYPE_BYTES, numel
from kernelscope.analysis.trace_model import OpInputs

CONCATENATIONS = frozenset({"aten::cat", "aten::_cat", "aten::concat", "aten::concatenate"})
_WIDTH = re.compile(r"OpaqueType<(\d+)u?>")
_COPIED = re.compile(r"direct_copy_kernel_cuda.*?\{lambda\(([\w:<> ]+)\)#\d+\}")
_MAX_ELEMENTS = 1 << 62  # beyond any memory: a corrupt shape


def element_width(kernel: str) -> int:
    """The bytes of one element a concatenation's kernel copies (a cat kernel's OpaqueType, a
    same-type copy's lambda); 0 where its name does not say."""
    match = _WIDTH.search(kernel)
    if match:
        return int(match.group(1))
    copied = _COPIED.search(kernel)
    return DTYPE_BYTES.get(copied.group(1), 0) if copied else 0


def concatenation_bytes(inputs: OpInputs, kernel: str) -> float:
    """Bytes one call of a CONCATENATIONS op reads and writes, its element width read from the
    name of the kernel it launched; 0 where the list's shapes or that width are unknown."""
    width = element_width(kernel)
    if not width or not inputs.dims or not isinstance(inputs.dims[0], list):
        return 0.0
    listed = cast(list[Any], inputs.dims[0])
    strides = _listed_strides(inputs, len(listed))
    read = written = 0
    for shape, stride in zip(listed, strides, strict=True):
        dims = cast(list[object], shape) if isinstance(shape, list) else None
        if dims is None or not all(type(d) is int for d in dims):
            return 0.0
        sizes = cast(list[int], dims)
        if min(sizes, default=0) < 0:
            return 0.0
        read += distinct_elements(sizes, stride)
        written += numel(sizes)
    return float(read + written) * width if written <= _MAX_ELEMENTS else 0.0


def _listed_strides(inputs: OpInputs, count: int) -> list[list[int] | None]:
    """Each listed tensor's strides (``Input Strides``); None for all where not one per tensor."""
    first: object = inputs.strides[0] if inputs.strides else None
    listed = cast(list[object], first) if isinstance(first, list) else []
    return [int_strides(s) for s in listed] if len(listed) == count else [None] * count
