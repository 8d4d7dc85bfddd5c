"""Memory movement: copies, fills, gathers, ``index_select``, embeddings and grid sampling
(costs/sampling.py). No FLOPs; bytes are what the kernel really touches:

- a copy reads its source's distinct elements (a broadcast, stride-0 dimension once) and
  writes the destination; ``_to_copy``, ``clone`` and ``contiguous`` read the input and write
  a copy of it (in the requested dtype);
- a fill writes the tensor and reads nothing;
- ``gather`` reads the index and one element of the source per index element, and writes
  as many; along any dimension but the last, with an index that is not expanded along the
  last, neighbouring outputs read far-apart elements, so each costs one DRAM access (64 B)
  at least; ``index_select`` reads the index and the
  selected slices, and writes them;
- ``embedding`` reads the indices and one table row per index, and writes those rows;
  ``embedding_bag`` reads the indices, the offsets (and per-sample weights) and one row
  per index, and writes one row per bag (and ``offset2bag``, one index per index).
- ``embedding_dense_backward`` (costs/embedding_backward.py) reads the gradient's rows and
  adds each into its table row.

- ``nll_loss`` (forward, backward, 2-D) picks one class's element per target: the forward
  reads the targets and one scattered element each (one DRAM access, at most the whole
  input), and writes the loss; the backward reads the targets and writes one element of the
  gradient per target, into a gradient a ``zero_`` of its own has just cleared (Nsight
  Compute on the H200, 4096 targets of 50,257 fp32 classes: forward 302-308 KB read,
  model 295 KB; backward 39-40 KB read and nothing written to DRAM while it runs, the
  writes held in L2, model 49 KB).

The table a gather or embedding reads from is never counted whole: only the rows touched.
"""

from __future__ import annotations

from typing import Any, cast

from kernelscope.analysis.costs.embedding_backward import (
    EMBEDDING_BACKWARD,
    embedding_backward_bytes,
)
from kernelscope.analysis.costs.sampling import SAMPLING, sampling_bytes
from kernelscope.analysis.costs.tensors import (
    DTYPE_BYTES,
    SCALAR_TYPE_BYTES,
    Tensor,
    arg_at,
    concrete_ints,
    concrete_value,
    numel,
    size_of,
)

COPIES = frozenset({"aten::copy_", "aten::_to_copy", "aten::contiguous", "aten::clone"})
FILLS = frozenset({"aten::fill_", "aten::zero_", "aten::zeros_like", "aten::ones_like"})
EMBEDDING_BAGS = frozenset(
    {"aten::embedding_bag", "aten::_embedding_bag", "aten::_embedding_bag_forward_only"}
)
GATHERS = frozenset({"aten::gather", "aten::index_select", "aten::embedding"}) | EMBEDDING_BAGS
#: (self, target, weight, reduction, ignore_index) and (grad_output, self, target, weight,
#: reduction, ignore_index, total_weight): a class's element picked per target.
CLASS_PICKS = frozenset({"aten::nll_loss_forward", "aten::nll_loss2d_forward"})
CLASS_PICKS_BACKWARD = frozenset({"aten::nll_loss_backward", "aten::nll_loss2d_backward"})
MOVEMENT = (
    COPIES | FILLS | GATHERS | CLASS_PICKS | CLASS_PICKS_BACKWARD | SAMPLING | EMBEDDING_BACKWARD
)
_INDEX_BYTES = 8  # an offset2bag entry: a long
#: What one scattered element read costs in DRAM traffic: two 32 B sectors. Measured on the
#: H200 (fixtures/counters_probe, gather_dim0): 176 MB for 3.1 M fp32 elements, 56 B each.
DRAM_ACCESS_BYTES = 64


def distinct_elements(shape: list[int], strides: list[int] | None) -> int:
    """Elements a tensor's memory holds: a dimension of stride 0 (an ``expand``) once."""
    if not strides or len(strides) != len(shape):
        return numel(shape)
    return numel([size for size, stride in zip(shape, strides, strict=True) if stride != 0])


def movement_bytes(
    name: str, args: list[Tensor | None], strides: list[Any], concrete: list[Any]
) -> float:
    """Bytes one call of a MOVEMENT op reads and writes; ``strides`` as ``Input Strides``."""
    if name in FILLS:
        return float(size_of(arg_at(args, 0)))
    if name in COPIES:
        return _copy(name, args, strides, concrete)
    if name in EMBEDDING_BAGS:
        return _embedding_bag(args, concrete)
    if name in CLASS_PICKS or name in CLASS_PICKS_BACKWARD:
        return _class_pick(name in CLASS_PICKS_BACKWARD, args, concrete)
    if name in SAMPLING:
        return sampling_bytes(name, args, concrete)
    if name in EMBEDDING_BACKWARD:
        return embedding_backward_bytes(args, concrete)
    return _gather(name, args, strides, concrete)


def _class_pick(backward: bool, args: list[Tensor | None], concrete: list[Any]) -> float:
    """``nll_loss``: the targets read and the class weights' picks; the forward reads one
    scattered element of the input per target (a DRAM access each, at most the whole input)
    and writes the loss (one per target unreduced); the backward reads the loss's gradient
    and writes one element of the input's gradient per target."""
    at = 1 if backward else 0
    source, target = arg_at(args, at), arg_at(args, at + 1)
    if source is None or target is None:
        return 0.0
    width = DTYPE_BYTES[source[1]]
    picks = numel(target[0])
    weights = picks * width if arg_at(args, at + 2) is not None else 0
    if backward:
        return float(size_of(arg_at(args, 0)) + size_of(target) + weights + picks * width)
    scattered = min(picks * max(width, DRAM_ACCESS_BYTES), size_of(source))
    unreduced = concrete_ints(concrete, at + 3) == [0]
    return float(size_of(target) + weights + scattered + (picks if unreduced else 1) * width)


def _read(args: list[Tensor | None], strides: list[Any], index: int) -> int:
    """Bytes of the distinct elements of the tensor argument at ``index``."""
    tensor = arg_at(args, index)
    if tensor is None:
        return 0
    at = strides[index] if 0 <= index < len(strides) else None
    return distinct_elements(tensor[0], int_strides(at)) * DTYPE_BYTES[tensor[1]]


def int_strides(recorded: object) -> list[int] | None:
    """One tensor's ``Input Strides`` entry: its ints (None where it is not a list); a list
    with other values is shorter than the shape, which distinct_elements then ignores."""
    listed = cast("list[object]", recorded) if isinstance(recorded, list) else None
    return [s for s in listed if type(s) is int] if listed is not None else None


def _copy(name: str, args: list[Tensor | None], strides: list[Any], concrete: list[Any]) -> float:
    if name == "aten::copy_":  # copy_(self, src): src read, self written
        return float(_read(args, strides, 1) + size_of(arg_at(args, 0)))
    source = arg_at(args, 0)
    if source is None:
        return 0.0
    width = DTYPE_BYTES[source[1]]
    dtype = concrete_ints(concrete, 1) if name == "aten::_to_copy" else []
    if len(dtype) == 1:
        width = SCALAR_TYPE_BYTES.get(dtype[0], width)
    return float(_read(args, strides, 0) + numel(source[0]) * width)


def _gather(name: str, args: list[Tensor | None], strides: list[Any], concrete: list[Any]) -> float:
    if name == "aten::embedding":  # (weight, indices, ...): one row per index
        table, index, row = arg_at(args, 0), 1, 1
        if table is not None and len(table[0]) >= 1:
            row = numel(table[0][1:])
    elif name == "aten::gather":  # (self, dim, index, ...): one element per index element
        table, index, row = arg_at(args, 0), 2, 1
        dim = concrete_ints(concrete, 1)
        shape = table[0] if table is not None else []
        if (
            len(dim) == 1
            and len(shape) > 1
            and dim[0] % len(shape) != len(shape) - 1
            and not _expanded_last(strides, 2)
        ):
            return _scattered_gather(args, strides, table)
    else:  # index_select(self, dim, index): the slices along dim
        table, index = arg_at(args, 0), 2
        dim = concrete_ints(concrete, 1)
        shape = table[0] if table is not None else []
        axis = dim[0] % len(shape) if len(dim) == 1 and shape else 0
        row = numel(shape[:axis] + shape[axis + 1 :]) if shape else 1
    indices = arg_at(args, index)
    if table is None or indices is None:
        return 0.0
    width = DTYPE_BYTES[table[1]]
    rows = min(numel(indices[0]) * row, numel(table[0]))  # what is read: at most the table
    written = numel(indices[0]) * row * width
    return float(_read(args, strides, index) + rows * width + written)


def _expanded_last(strides: list[Any], index: int) -> bool:
    """The argument's last dimension has stride 0 (an expanded index: one source row per
    output row, read contiguously, as ``index_select`` and ``embedding`` gather on CUDA)."""
    at: object = strides[index] if 0 <= index < len(strides) else None
    if not isinstance(at, list):
        return False
    listed = cast("list[object]", at)
    return bool(listed) and listed[-1] == 0


def _scattered_gather(args: list[Tensor | None], strides: list[Any], table: Tensor | None) -> float:
    """``gather`` along a dimension other than the last: the index read, one DRAM access per
    element gathered (at most the whole source), the output written."""
    indices = arg_at(args, 2)
    if table is None or indices is None:
        return 0.0
    width = DTYPE_BYTES[table[1]]
    n = numel(indices[0])
    read = min(n * max(width, DRAM_ACCESS_BYTES), numel(table[0]) * width)
    return float(_read(args, strides, 2) + read + n * width)


def _embedding_bag(args: list[Tensor | None], concrete: list[Any]) -> float:
    """embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
    per_sample_weights, include_last_offset, padding_idx)."""
    table, indices, offsets = arg_at(args, 0), arg_at(args, 1), arg_at(args, 2)
    if table is None or indices is None or len(table[0]) < 1:
        return 0.0
    width = DTYPE_BYTES[table[1]]
    dim = numel(table[0][1:])
    looked_up = numel(indices[0])
    if offsets is not None:
        bags = numel(offsets[0]) - (1 if concrete_value(concrete, 7) == "True" else 0)
    else:  # 2-D indices: one bag per row
        bags = indices[0][0] if len(indices[0]) == 2 else 1
    read = size_of(indices) + size_of(offsets) + size_of(arg_at(args, 6))
    read += min(looked_up * dim, numel(table[0])) * width
    return float(read + max(bags, 0) * dim * width + looked_up * _INDEX_BYTES)
