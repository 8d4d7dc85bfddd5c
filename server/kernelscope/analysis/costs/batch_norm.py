"""Batch normalization in training as cuDNN runs it. Where a channel's elements do not fit
on chip its kernels make two passes over the data: the forward
(``bn_fw_tr_1C11_kernel_NCHW``) reads the input for the statistics and again for the result;
the backward (``bn_bw_1C11_kernel_new``) reads the input and the incoming gradient for its
sums and again for the input's gradient. Its ``singleread`` kernels read once, as the
per-op model counts. The second pass finds in L2 what is still there: where the data a pass
reads (the input; the input and the gradient) fills no more than L2_SHARE of the L2, it
costs no DRAM traffic.

Nsight Compute on the H200 (docs/h200-run/tenth/fused_heldout.txt: torchvision's ResNet-18
trained under fp16 autocast, batch 64): the forward over a 102.8 MB input read it twice
(308.3 MB a call with its output, 1.50x the one-pass model), over 25.7 MB inputs once (1.06);
the backward over 25.7 + 25.7 MB and 102.8 + 102.8 MB read both twice (1.66-1.67), over
12.8 + 12.8 MB once (1.00).

In channels_last cuDNN's backward is ``batchnorm_bwtr_nhwc_semiPersist``: on an H100
(fixtures/efficientnet_counters, timm's EfficientNet-B0 under fp16, batch 64) it read its
input and gradient a second time in part, the more the larger they were: 0.18 of a 48 MB
pair, 0.63 of 103 MB, 0.82-0.89 of 116-308 MB, little or none of 34 MB or less (0.14 of
one 29 MB pair). The model counts the
part of the pair past what the L2 keeps (L2_SHARE of it) as read again: its 19 measured
shapes read 0.88 to 1.10 of the model."""

from __future__ import annotations

import re

from kernelscope.analysis.costs.softmax import L2_SHARE
from kernelscope.analysis.costs.tensors import arg_at, by_position, size_of
from kernelscope.analysis.trace_model import OpInputs

FORWARD = "aten::cudnn_batch_norm"  # (input, weight, bias, running_mean, running_var, ...)
BACKWARD = "aten::cudnn_batch_norm_backward"  # (input, grad_output, weight, ...)
_TWO_PASS = re.compile(r"\bcudnn::(bn_fw_tr_1C11_kernel_NCHW|bn_bw_1C11_kernel_new)<")
_SEMI_PERSISTENT_BACKWARD = re.compile(r"\bcudnn::batchnorm_bwtr_nhwc_semiPersist<")


def batch_norm_reread_bytes(name: str, inputs: OpInputs, kernel: str, l2_bytes: float) -> float:
    """Bytes one call of cuDNN's batch norm reads in its second pass (see the module): all
    of what it reads, past L2_SHARE of the L2; the part past that share, for the
    semi-persistent channels_last backward; 0 for every other op or kernel, a single-read
    kernel, data the L2 keeps, or unknown shapes or L2."""
    if l2_bytes <= 0 or name not in (FORWARD, BACKWARD):
        return 0.0
    if name == BACKWARD and _SEMI_PERSISTENT_BACKWARD.search(kernel):
        args = by_position(inputs) or []
        pair = float(sum(map(size_of, [arg_at(args, 0), arg_at(args, 1)])))
        return max(0.0, pair - L2_SHARE * l2_bytes)
    match = _TWO_PASS.search(kernel)
    if match is None:
        return 0.0
    forward = match.group(1).startswith("bn_fw")
    if forward != (name == FORWARD):
        return 0.0
    args = by_position(inputs) or []
    read = [arg_at(args, 0)] if forward else [arg_at(args, 0), arg_at(args, 1)]
    again = float(sum(map(size_of, read)))
    return again if again > L2_SHARE * l2_bytes else 0.0
