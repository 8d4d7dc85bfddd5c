"""Softmax rows too wide for registers or shared memory. ATen then runs its generic kernels
(``cunn_SoftMaxForward<…>``, ``cunn_SoftMaxBackward<…>``; the ``Reg``, ``Smem`` and warp
variants hold a row on chip and read it once), which go back to global memory on every pass:
the forward reads its input for the maximum, for the sum and for the result; the backward
reads the incoming gradient for its sum, then again with the output.

Nsight Compute on the H200 (fixtures/softmax_probe, ``--cache-control all``): the backward
read 2.7-3.0x its gradient's size on every shape; the forward read 2.8-2.9x its input where
the rows in flight (one block of 1,024 threads a row, two blocks an SM) overflowed the L2
(53-68 MB of 50 MiB) and 1.0-1.2x where they fitted (17-27 MB): the L2 kept the re-reads.
GPT-NeoX's training step measured 1.93x the single-pass model on its ``_log_softmax``
(docs/h200-run/seventh/counters.txt). A Llama's ``_log_softmax`` over 2048x32000 fp32 on an
H100 (fixtures/llama_counters), its rows in flight 33.8 MB, read its input 2.47 times: the
L2 keeps the re-reads only up to about 0.6 of its size, not the 0.75 the probe's two sides
left open.
"""

from __future__ import annotations

import re

from kernelscope.analysis.costs.tensors import DTYPE_BYTES, arg_at, by_position, size_of
from kernelscope.analysis.trace_model import OpInputs

FORWARD = frozenset({"aten::_softmax", "aten::_log_softmax", "aten::softmax", "aten::log_softmax"})
BACKWARD = frozenset({"aten::_softmax_backward_data", "aten::_log_softmax_backward_data"})
_GENERIC = re.compile(r"\bcunn_SoftMax(Forward|Backward)<")
ROWS_IN_FLIGHT_PER_SM = 2
#: The share of the L2 the data a kernel reads again may fill and still be read from it:
#: between the 27 MB of rows in flight that stayed (1.2 reads, H200) and the 33.8 MB that
#: did not (2.47 reads, H100), measured; both have 50 MiB of L2.
L2_SHARE = 0.6


def reread_bytes(
    name: str, inputs: OpInputs, kernel: str, sm_count: int | None, l2_bytes: float
) -> float:
    """Bytes one call of a softmax op reads beyond the single pass the per-op model counts,
    where its kernel is ATen's generic one; 0 for every other op or kernel, or where the
    shapes (or, for a forward, the GPU's SMs and L2) are unknown."""
    match = _GENERIC.search(kernel)
    args = by_position(inputs) if match else None
    first = arg_at(args or [], 0)
    if match is None or first is None:
        return 0.0
    if match.group(1) == "Backward":
        return float(size_of(first)) if name in BACKWARD else 0.0
    if name not in FORWARD or not sm_count or l2_bytes <= 0:
        return 0.0
    shape, dtype = first
    # the generic kernel runs where the softmax dimension is the innermost of size > 1
    row = next((d for d in reversed(shape) if d > 1), 1)
    rows = size_of(first) // (row * DTYPE_BYTES[dtype]) if row else 0
    in_flight = min(rows, ROWS_IN_FLIGHT_PER_SM * sm_count) * row * DTYPE_BYTES[dtype]
    return 2.0 * size_of(first) if in_flight > L2_SHARE * l2_bytes else 0.0
