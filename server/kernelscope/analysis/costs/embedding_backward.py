"""``embedding_dense_backward`` (grad_output, indices, num_weights, padding_idx,
scale_grad_by_freq): the table's gradient accumulated row by row, into a gradient a
``zeros`` of its own has just cleared (its fill is a row of its own).

On CUDA, up to FEATURE_KERNEL_INDICES indices without ``scale_grad_by_freq`` go to one
kernel (``embedding_backward_feature_kernel``) that reads the indices and the gradient's
rows once, and adds each row into its table row: a read of every distinct table row (at
most ``min(indices, num_weights)``: which rows repeat is the data's) and a write per index
(repeats meet in L2, but each is written there). Nsight Compute on an H100 (BART's
training step, fp32 gradients of 512 columns; docs/h200-run/thirteenth/counters_a.txt):
1,024 token indices of 50,265 rows 6.27 MB measured against 6.30 modelled, 128 positions
0.79 against 0.79, two calls of 2,048 indices (tokens, and positions of 1,026 rows) 21.45
against 23.1 (the positions repeat: 256 distinct rows read, not 1,026).

More indices, or ``scale_grad_by_freq``, sort the indices (cub's radix sort: a pass per
byte of the key, each reading and writing the keys and their positions), sum each run of up
to ten equal indices' gradient rows into a partial row (the gradient read, the partials
written in the accumulation type: fp32 for fp16 and bf16), and add the partials into the
table (read, and each distinct row written): ``Σ ceil(count / 10)`` partials, at most
``indices / 10 + distinct``. GPT-NeoX's 4,096 token indices of 50,432 rows, 512 fp32
columns (H100, docs/h200-run/thirteenth/embedding_g.txt): 34.77 MB measured over its 19
kernels (1.4 MB of them the sort), 34.6 modelled. PyTorch versions differ here (a newer
one adds into the table directly where the segments are few): an estimate for others.
"""

from __future__ import annotations

from typing import Any

from kernelscope.analysis.costs.tensors import (
    DTYPE_BYTES,
    FLAGS,
    Tensor,
    arg_at,
    concrete_ints,
    concrete_value,
    numel,
    size_of,
)

EMBEDDING_BACKWARD = frozenset({"aten::embedding_dense_backward"})
#: At most this many indices (and no scaling by frequency) take the one-kernel path.
FEATURE_KERNEL_INDICES = 3072
_RUN = 10  # equal indices summed into one partial row at most (NROWS_PER_THREAD)


def embedding_backward_bytes(args: list[Tensor | None], concrete: list[Any]) -> float:
    """Bytes one call reads and writes (see the module's docstring); 0 without shapes."""
    grad, indices = arg_at(args, 0), arg_at(args, 1)
    if grad is None or indices is None or not grad[0]:
        return 0.0
    n = numel(indices[0])
    row = grad[0][-1] * DTYPE_BYTES[grad[1]]
    rows = concrete_ints(concrete, 2)
    distinct = min(n, rows[0]) if len(rows) == 1 and rows[0] > 0 else n
    scaled = FLAGS.findall(concrete_value(concrete, 4)) == ["True"]
    if n <= FEATURE_KERNEL_INDICES and not scaled:
        return float(size_of(indices) + size_of(grad) + distinct * row + n * row)
    passes = DTYPE_BYTES[indices[1]]  # a pass per byte of the key
    sort = passes * 4 * size_of(indices)  # keys and their positions, read and written
    partials = min(n, -(-n // _RUN) + distinct)
    partial_row = grad[0][-1] * (8 if grad[1] == "double" else 4)  # the accumulation type
    return float(sort + size_of(grad) + 2 * partials * partial_row + distinct * row)
