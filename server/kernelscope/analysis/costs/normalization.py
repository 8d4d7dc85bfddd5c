"""Layer norm's backward as CUDA runs it: one kernel for the input's gradient (it reads the
incoming gradient and the input, with the mean, rstd and weight, and writes the gradient),
and, where the weight's or bias's gradient is asked for (``output_mask``), a second one
(``GammaBetaBackward``) that reads the incoming gradient and the input again. Nsight Compute
flushes the caches before each kernel (``--cache-control all``), so each reads them from
DRAM: Whisper-tiny's training step on an H100 (fp32 layer norms under bf16 autocast, 9 calls
over 8x1500x384 and 13 over 8x64x384 a step) measured 8.466e8 and 5.173e7 B: the one-pass
model (dy and x read once, dx written) read 0.59 of that, this one 0.98 and 0.99
(fixtures/whisper_counters)."""

from __future__ import annotations

from typing import Any

from kernelscope.analysis.costs.tensors import Tensor, arg_at, concrete_value, size_of

LAYER_NORM_BACKWARD = "aten::native_layer_norm_backward"
"""(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask)"""


def layer_norm_backward_reread(args: list[Tensor | None], concrete: list[Any]) -> float:
    """Bytes the weight's and bias's gradient kernel reads again (0 where neither is asked
    for: no ``output_mask`` recorded and no weight, or a mask of ``[True, False, False]``)."""
    mask = concrete_value(concrete, 7)
    if mask:
        flags = [part.strip() == "True" for part in mask.strip("[]").split(",")]
        weights = len(flags) == 3 and (flags[1] or flags[2])
    else:
        weights = arg_at(args, 5) is not None
    if not weights:
        return 0.0
    return float(size_of(arg_at(args, 0)) + size_of(arg_at(args, 1)))
