"""Ops over a list of tensors (``torch.cat``), whose element type the trace leaves out: their
``Input type`` is ``TensorList``, with each tensor's shape in ``Input Dims`` but no dtype.
ATen's concatenation kernels are templated on the element's width in bytes
(``CatArrayBatchedCopy<OpaqueType<2u>, …>``), so the row's kernel says it.

A concatenation reads each listed tensor once and writes the result, as many bytes
(Nsight Compute on the H200, Qwen2's decode step: its cat row read and wrote 16.9 MB
a step, unmodelled until then: docs/h200-run/fifth/counters.txt).
"""

from __future__ import annotations

import re
from typing import Any, cast

from kernelscope.analysis.costs.tensors import numel
from kernelscope.analysis.trace_model import OpInputs

CONCATENATIONS = frozenset({"aten::cat", "aten::_cat", "aten::concat", "aten::concatenate"})
_WIDTH = re.compile(r"OpaqueType<(\d+)u?>")
_MAX_ELEMENTS = 1 << 62  # beyond any memory: a corrupt shape


def element_width(kernel: str) -> int:
    """The bytes of one element a concatenation kernel copies; 0 where its name does not say."""
    match = _WIDTH.search(kernel)
    return int(match.group(1)) if match else 0


def concatenation_bytes(inputs: OpInputs, kernel: str) -> float:
    """Bytes one call of a CONCATENATIONS op reads and writes, its element width read from the
    name of the kernel it launched; 0 where the list's shapes or that width are unknown."""
    width = element_width(kernel)
    if not width or not inputs.dims or not isinstance(inputs.dims[0], list):
        return 0.0
    listed = cast(list[Any], inputs.dims[0])
    elements = 0
    for shape in listed:
        dims = cast(list[object], shape) if isinstance(shape, list) else None
        if dims is None or not all(type(d) is int for d in dims):
            return 0.0
        sizes = cast(list[int], dims)
        if min(sizes, default=0) < 0:
            return 0.0
        elements += numel(sizes)
    return 2.0 * elements * width if elements <= _MAX_ELEMENTS else 0.0
