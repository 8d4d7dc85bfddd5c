"""KS701: ops with a large share of GPU time far below their own roof, and their causes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import msgspec

from kernelscope.analysis.checks.source_lines import row_line
from kernelscope.analysis.costs import GENERATED_KERNEL_PREFIX
from kernelscope.analysis.facts import Facts, Options
from kernelscope.analysis.roofline import OpRoof
from kernelscope.analysis.trace_model import Op
from kernelscope.findings import Code, Finding, Severity
from kernelscope.units import cut

SLOW_SHARE = 0.10  # of the calls' GPU time
SLOW_COMPUTE = 0.35  # of the dtype's peak
SLOW_MEMORY = 0.25  # of HBM bandwidth
_ALIGN = {"c10::BFloat16": 8, "c10::Half": 8, "float": 4, "c10::Float8_e4m3fn": 16}


def find_slow_ops(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS701: ops with a large share of GPU time far below their own roof, and the causes
    the evidence supports."""
    del options
    sms = facts.sm_count
    for r in facts.roofline:
        if r.share < SLOW_SHARE or r.efficiency is None:
            continue
        floor = SLOW_COMPUTE if r.bound == "compute" else SLOW_MEMORY
        if r.bound not in ("compute", "memory") or r.efficiency >= floor:
            continue
        causes, tries = _slow_causes(facts, r, sms)
        rate = (
            f"{r.achieved_tflops:.0f} TFLOP/s"
            if r.bound == "compute"
            else f"{r.achieved_gbps:.0f} GB/s"
        )
        path, line = row_line(facts, r)
        yield Finding(
            Code.BELOW_ROOF,
            Severity.WARNING,
            f"{r.name} ({r.shapes}) takes {r.share:.0%} of GPU time at {rate} = "
            f"{r.efficiency:.0%} of its roof ({r.roof}{', measured' if r.measured else ''}): "
            f"{'; '.join(causes)}",
            path=path,
            line=line,
            try_=tries,
            evidence={
                "share": round(r.share, 3),
                "efficiency": round(r.efficiency, 3),
                "gpu_us_per_step": round(r.gpu_us_per_step, 1),
                "kernel": cut(r.kernel, 200),
                "figures": "measured" if r.measured else "model",
            },
        )


def _slow_causes(facts: Facts, r: OpRoof, sms: int | None) -> tuple[list[str], list[str]]:
    causes: list[str] = []
    tries: list[str] = []
    dims = _matrix_dims(facts, r)
    align = _ALIGN.get(r.dtype or "", 8)
    odd = sorted({d for d in dims if d % align}) if r.kind in ("gemm", "conv") else []
    if odd:
        causes.append(
            f"{', '.join(map(str, odd))} is not a multiple of {align}: the library falls back to "
            f"a kernel without aligned vector loads ({cut(r.kernel, 80)})"
        )
        tries.append(
            f"pad that dimension to a multiple of {align} (64 is better still: "
            f"{odd[0]} → {-(-odd[0] // 64) * 64}), e.g. a padded vocabulary or hidden size"
        )
    # Only where the FLOPs bound it: a memory-type one (dcgan's last convolution, 16 dot
    # products of 8,192 elements at 1 % of HBM) is not waiting on its math.
    if r.kind in ("gemm", "conv") and r.dtype == "float" and r.bound == "compute":
        causes.append("fp32 math on CUDA cores: TF32 tensor cores are off")
        tries.append(
            "torch.backends.cuda.matmul.allow_tf32 = True (or "
            'torch.set_float32_matmul_precision("high")), or bf16 autocast'
        )
    if r.grid_blocks is not None and sms and r.grid_blocks < sms:
        causes.append(f"its kernel's grid has {r.grid_blocks} blocks for {sms} SMs")
        tries.append("give the kernel more parallel work: a larger batch, or fuse small calls")
    if r.kind == "copy" and r.strides and _non_contiguous(facts, r):
        causes.append(f"a strided (non-contiguous) copy (strides {r.strides})")
        tries.append("avoid the copy: keep the layout the consumer wants, or copy once")
    if r.kind == "attention":
        tries.append(
            "try another SDPA backend: with torch.nn.attention.sdpa_kernel("
            "SDPBackend.CUDNN_ATTENTION) (on Hopper often the fastest) or FLASH_ATTENTION"
        )
    if not causes:
        causes.append(f"a slow kernel for this shape ({cut(r.kernel, 80)})")
        tries.append(
            "try another shape or dtype, or a library op (cuBLAS, cuDNN)"
            if r.name.startswith(GENERATED_KERNEL_PREFIX) and r.kind != "custom"  # compiled
            else "try another shape or dtype, torch.compile(mode='max-autotune'), or a fused "
            "library op"
        )
    return causes, tries


class _Layout(msgspec.Struct):
    dims: list[Any] = msgspec.field(default_factory=list[Any], name="Input Dims")
    strides: list[Any] = msgspec.field(default_factory=list[Any], name="Input Strides")


_LAYOUT = msgspec.json.Decoder(_Layout)


def _layout(op: Op) -> tuple[list[list[int]], list[list[int]]]:
    """The op's tensor shapes and strides (lists of ints only; others left out)."""
    try:
        layout = _LAYOUT.decode(op.args)
    except msgspec.MsgspecError:
        return [], []
    return _int_lists(layout.dims), _int_lists(layout.strides)


def _int_lists(values: list[Any]) -> list[list[int]]:
    out: list[list[int]] = []
    for v in values:
        if isinstance(v, list) and all(type(x) is int for x in cast("list[object]", v)):
            out.append(cast("list[int]", v))
    return out


def _matrix_dims(facts: Facts, r: OpRoof) -> list[int]:
    """The last two sizes of each tensor input of the row's op."""
    if r.op_index < 0:
        return []
    dims, _ = _layout(facts.trace.ops[r.op_index])
    return [size for shape in dims if len(shape) >= 2 for size in shape[-2:]]


def _non_contiguous(facts: Facts, r: OpRoof) -> bool:
    """Whether a tensor input of the row's op has strides other than row-major ones."""
    if r.op_index < 0:
        return False
    dims, strides = _layout(facts.trace.ops[r.op_index])
    for shape, stride in zip(dims, strides, strict=False):
        expect = 1
        for size, st in zip(reversed(shape), reversed(stride), strict=False):
            if size != 1 and st != expect:
                return True
            expect *= size
    return False
