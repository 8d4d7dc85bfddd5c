"""Ops over lists of tensors (``torch._foreach_*``: an optimizer's step), which ATen runs as
``multi_tensor_apply_kernel<…, XFunctor<T, depth, r_args_depth, res_arg_index>, …>``: each
element of the ``r_args_depth`` lists it reads is read once and one list is written, in
element type ``T``.

The elements: the listed tensors' shapes where the trace has them (Kineto records a tensor
list's shapes only while it is short: train_mlp's 8 tensors, not ViT's or GPT-NeoX's ~80);
else the kernels' grids, one block per chunk of at most 65,536 elements (ATen's
``kChunkSize``) of one tensor, a bound that counts each tensor's last chunk as full
(GPT-NeoX's AdamW: 73.8 M elements from its grids against its 70.6 M parameters)."""

from __future__ import annotations

import re
from typing import Any, cast

from kernelscope.analysis.costs.tensors import DTYPE_BYTES, numel
from kernelscope.analysis.trace_model import OpInputs

FOREACH_PREFIX = "aten::_foreach_"
MULTI_TENSOR_KERNEL = "multi_tensor_apply_kernel"
CHUNK_ELEMENTS = 65536
_FUNCTOR = re.compile(r"(\w+Functor)<([\w:]+), (\d+), (\d+), (\d+)>")
_MAX_ELEMENTS = 1 << 62  # beyond any memory: a corrupt shape


def bytes_per_element(kernel: str) -> int:
    """Bytes a multi-tensor kernel moves per element of a list: each list it reads and the
    one it writes; 0 where its name does not say."""
    if MULTI_TENSOR_KERNEL not in kernel:
        return 0
    match = _FUNCTOR.search(kernel)
    width = DTYPE_BYTES.get(match.group(2), 0) if match else 0
    return width * (int(match.group(4)) + 1) if match else 0


def listed_elements(inputs: OpInputs) -> int:
    """Elements of the op's first tensor list, from its shapes; 0 where the trace has none."""
    first: object = inputs.dims[0] if inputs.dims else None
    if not isinstance(first, list) or not first:
        return 0
    total = 0
    for shape in cast(list[Any], first):
        sizes = cast(list[object], shape) if isinstance(shape, list) else None
        if sizes is None or not all(type(d) is int and d >= 0 for d in sizes):
            return 0
        total += numel(cast(list[int], sizes))
    return total if total <= _MAX_ELEMENTS else 0


def foreach_bytes(inputs: OpInputs, kernel: str, blocks: int) -> tuple[float, bool]:
    """Bytes one call of a foreach op moves, and whether they are exact (the lists' shapes)
    rather than a bound (`blocks`, its kernels' grids summed); (0, True) where unknown."""
    per = bytes_per_element(kernel)
    if not per:
        return 0.0, True
    exact = listed_elements(inputs)
    if exact:
        return float(exact * per), True
    return float(blocks * CHUNK_ELEMENTS * per), False
