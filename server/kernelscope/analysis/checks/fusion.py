"""KS501: chains of elementwise kernels that one fused kernel would replace."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from kernelscope.analysis.checks.source_lines import lines_with_ops
from kernelscope.analysis.facts import Facts, Options
from kernelscope.analysis.trace_model import Op
from kernelscope.findings import Code, Finding, Severity
from kernelscope.units import fmt_bytes

POINTWISE = frozenset(
    f"aten::{name}"
    for base in (
        "add",
        "sub",
        "mul",
        "div",
        "cos",
        "sin",
        "tan",
        "exp",
        "exp2",
        "log",
        "log1p",
        "tanh",
        "sigmoid",
        "relu",
        "gelu",
        "silu",
        "neg",
        "abs",
        "pow",
        "sqrt",
        "rsqrt",
        "clamp",
        "clamp_min",
        "clamp_max",
        "where",
        "masked_fill",
        "threshold",
        "leaky_relu",
        "hardtanh",
        "erf",
        "reciprocal",
        "maximum",
        "minimum",
        "lerp",
        "addcmul",
        "addcdiv",
        "sign",
        "floor",
        "ceil",
        "round",
        "square",
        "logical_not",
        "eq",
        "ne",
        "gt",
        "lt",
        "ge",
        "le",
    )
    for name in (base, base + "_")
)
CHAIN_MIN_SHARE = 0.02  # of the calls' GPU time
CHAIN_MIN_US = 5.0  # of GPU time per step


def find_fusion_chains(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS501: runs of elementwise kernels, each reading and writing whole tensors, when they
    take at least ``CHAIN_MIN_SHARE`` of the calls' GPU time and ``CHAIN_MIN_US`` per step."""
    del options
    tl = facts.timeline
    chains, chain_us = _elementwise_chains(facts)
    if not chains or not _matters(chain_us, tl.kernel_us, tl.steps):
        return
    steps = tl.steps
    names = Counter(op.name for chain in chains for op in chain)
    moved = sum(cost.bytes for cost in facts.costs.many([op for c in chains for op in c])) / steps
    lines = lines_with_ops(facts, set(names))
    where = lines[0] if lines else (facts.function_path, facts.function_line)
    line_list = ", ".join(str(line) for _, line in lines[:6])
    severity = Severity.WARNING if facts.verdict.bound == "memory" else Severity.INFO
    yield Finding(
        Code.ELEMENTWISE_CHAIN,
        severity,
        f"{sum(len(c) for c in chains) / steps:g} elementwise kernels per step in chains "
        f"({', '.join(f'{n} ×{c // steps}' for n, c in names.most_common(4))})"
        + (f" moving {fmt_bytes(moved)} per step" if moved else "")
        + (f"; lines {line_list}" if line_list else "")
        + ": each kernel reads and writes the whole tensor",
        path=where[0],
        line=where[1],
        try_=[
            "torch.compile fuses the chain into one kernel: one read, one write",
            "or write it as one op (torch.addcmul, in-place ops, a custom Triton kernel)",
        ],
        evidence={
            "kernels_per_step": sum(len(c) for c in chains) / steps,
            "gpu_us_per_step": round(chain_us / steps, 1),
            "gpu_share": round(chain_us / tl.kernel_us, 3),
        },
    )


def _elementwise_chains(facts: Facts) -> tuple[list[list[Op]], float]:
    """Runs of two or more elementwise kernels in GPU order (copies and sets neither extend
    nor break one), with the GPU time of their kernels."""
    ops = facts.trace.ops
    chains: list[list[Op]] = []
    chain_us = 0.0
    run: list[Op] = []
    run_us = 0.0
    for g in facts.timeline.events:
        if g.cat != "kernel":
            continue
        op = ops[g.op] if g.op >= 0 else None
        if op is not None and op.name in POINTWISE:
            if not run or run[-1] is not op:
                run.append(op)
            run_us += g.dur
            continue
        if len(run) >= 2:
            chains.append(run)
            chain_us += run_us
        run, run_us = [], 0.0
    if len(run) >= 2:
        chains.append(run)
        chain_us += run_us
    return chains, chain_us


def _matters(us: float, gpu_us: float, steps: int) -> bool:
    """Whether GPU work of ``us`` in all is worth a finding: at least ``CHAIN_MIN_SHARE`` of
    the calls' ``gpu_us`` and ``CHAIN_MIN_US`` per step."""
    return us >= CHAIN_MIN_SHARE * gpu_us and us / max(steps, 1) >= CHAIN_MIN_US
