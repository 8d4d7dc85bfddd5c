"""FLOPs and bytes of an op, from the shapes, dtypes and scalar arguments Kineto records
(``record_shapes=True``: ``Input Dims``, ``Input type``, ``Concrete Inputs``), one module
per op family.

FLOPs are counted for matrix products, matrix-vector products, convolutions (forward and
backward) and attention (every SDPA backend, forward and backward), 2 per multiply-add. For
those ops bytes are the operands read once and the result written once, its shape worked out
from the arguments; for every other op each input is read once and the output written once,
the output nothing for reductions and the largest input for the rest (elementwise ops and
copies). Arguments are read at their positions in the op's ATen signature.
"""

from kernelscope.analysis.costs.attention import ATTENTION
from kernelscope.analysis.costs.convolutions import CONVOLUTIONS
from kernelscope.analysis.costs.elementwise import GENERATED_KERNEL_PREFIX, REDUCTIONS
from kernelscope.analysis.costs.per_op import (
    BY_CONCRETE,
    FLOP_OPS,
    OpCost,
    OpCosts,
    bytes_of,
    flops_of,
    op_bytes,
    op_flops,
)
from kernelscope.analysis.costs.products import MATMULS, MATVECS, matmul_dtype
from kernelscope.analysis.costs.tensors import DTYPE_BYTES, concrete_inputs, numel

__all__ = [
    "ATTENTION",
    "BY_CONCRETE",
    "CONVOLUTIONS",
    "DTYPE_BYTES",
    "FLOP_OPS",
    "GENERATED_KERNEL_PREFIX",
    "MATMULS",
    "MATVECS",
    "REDUCTIONS",
    "OpCost",
    "OpCosts",
    "bytes_of",
    "concrete_inputs",
    "flops_of",
    "matmul_dtype",
    "numel",
    "op_bytes",
    "op_flops",
]
