"""Findings from the memory pass: a line holding a large share of the peak (KS131), the
allocator's reserve unused at the peak (KS132), and allocator churn in the steady state
(KS133): device allocations and frees on warm calls, with their bytes, lines and time."""

from __future__ import annotations

from collections.abc import Iterable

from kernelscope.analysis.facts import Facts, Options
from kernelscope.findings import Code, Finding, Severity
from kernelscope.protocol import MemoryLine, MemoryPass
from kernelscope.units import fmt_bytes, fmt_us

#: A line holding at least this share of the peak, and this many bytes, is named.
HEAVY_SHARE, HEAVY_MIN_BYTES = 0.25, 1 << 20
#: Reserved-but-unused at the peak at least this share of the reserve, and this many bytes.
FRAGMENTED_SHARE, FRAGMENTED_MIN_BYTES = 0.25, 256 << 20
#: Runtime calls that take or return device memory (cudaMalloc and the VMM calls that
#: expandable segments use).
DEVICE_MEMORY_CALLS = ("cudaMalloc", "cudaFree", "cuMemCreate", "cuMemMap", "cuMemUnmap",
                       "cuMemRelease", "cuMemAddressReserve", "hipMalloc", "hipFree")  # fmt: skip

#: Not offered where the call runs a backward (its memory pass saw one): a training step.
NO_GRAD_TRY = "torch.inference_mode() if no gradient is needed here"
#: What to try for a heavy line, by the kind that dominates it.
TRY_BY_KIND = {
    "activations": [
        "activation checkpointing on this block (torch.utils.checkpoint): recompute in "
        "backward instead of keeping its activations",
        "a smaller dtype for the activations (bf16 autocast)",
        "a smaller batch, with gradient accumulation to keep the effective batch",
    ],
    "temporaries": [
        "an in-place op (add_, mul_, relu(inplace=True)) where the input is not needed again",
        NO_GRAD_TRY,
        "torch.compile: fused kernels do not materialize the intermediates",
        "del large intermediates (or let them go out of scope) before the next big allocation",
    ],
    "gradients": [
        "opt.zero_grad(set_to_none=True) so gradients do not outlive the step",
        "gradient accumulation over micro-batches (the same gradients, smaller activations)",
        "sharded gradients (FSDP / ZeRO-2) across GPUs",
    ],
    "optimizer_state": [
        "a lighter optimizer state: 8-bit Adam, Adafactor, or SGD with momentum",
        "sharded optimizer state (FSDP / ZeRO-1) across GPUs",
    ],
    "parameters": [
        "a smaller parameter dtype (bf16 weights with an fp32 master copy in the optimizer)",
    ],
}


def find_memory(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS131, KS132 and KS133 from the sidecar's memory pass."""
    del options
    memory = facts.sidecar.memory_pass if facts.sidecar else None
    if memory is None or memory.error:
        return
    yield from heavy_lines(memory)
    yield from fragmentation(memory, facts)
    yield from churn(memory, facts)


def heavy_lines(memory: MemoryPass) -> Iterable[Finding]:
    """KS131: a line of the user's that holds a large share of the peak."""
    peak = memory.trace_peak_bytes or memory.peak_allocated_bytes
    if peak <= 0:
        return
    trains = any(r.via == "backward" or r.kinds.get("gradients") for r in memory.lines)
    for row in memory.lines:
        if not row.path or row.live_at_peak_bytes < max(HEAVY_SHARE * peak, HEAVY_MIN_BYTES):
            continue
        kind = dominant_kind(row)
        share = row.live_at_peak_bytes / peak
        via = " (its backward)" if row.via == "backward" else ""
        yield Finding(
            Code.MEMORY_HEAVY_LINE,
            Severity.WARNING if share >= 0.5 else Severity.INFO,
            f"this line{via} holds {fmt_bytes(row.live_at_peak_bytes)} at the memory peak, "
            f"{share:.0%} of {fmt_bytes(peak)} ({kinds_text(row.kinds)})",
            path=row.path,
            line=row.line,
            try_=[t for t in TRY_BY_KIND.get(kind, []) if not (trains and t == NO_GRAD_TRY)],
            evidence={
                "live_at_peak_bytes": row.live_at_peak_bytes,
                "peak_bytes": peak,
                "share": round(share, 3),
                "kind": kind,
            },
        )


def fragmentation(memory: MemoryPass, facts: Facts) -> Iterable[Finding]:
    """KS132: much of the allocator's reserve was unused at the peak."""
    unused = memory.reserved_unused_at_peak_bytes
    reserved = memory.reserved_at_peak_bytes
    if unused is None or not reserved:
        return
    if unused < FRAGMENTED_MIN_BYTES or unused < FRAGMENTED_SHARE * reserved:
        return
    yield Finding(
        Code.MEMORY_FRAGMENTED,
        Severity.WARNING,
        f"at the memory peak the allocator had reserved {fmt_bytes(reserved)} but only "
        f"{fmt_bytes(memory.trace_peak_bytes)} was allocated: {fmt_bytes(unused)} "
        f"({unused / reserved:.0%}) was cached or fragmented, and counts against an OOM",
        path=facts.function_path,
        line=facts.function_line,
        try_=[
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments grow in place "
            "instead of splitting into unusable pieces)",
            "allocate the largest tensors first, or keep their shapes fixed across steps",
        ],
        evidence={"reserved_at_peak_bytes": reserved, "unused_at_peak_bytes": unused},
    )


def churn(memory: MemoryPass, facts: Facts) -> Iterable[Finding]:
    """KS133: a warm call that still took memory from the device (cudaMalloc/cudaFree or
    their expandable-segments twins): the allocator's own counters, on the line."""
    allocs, frees = memory.device_allocs, memory.device_frees
    if allocs is None or (allocs == 0 and not frees):
        return
    rows = sorted((r for r in memory.lines if r.device_allocs), key=lambda r: -r.device_alloc_bytes)
    top = rows[0] if rows else None
    taken = sum(r.device_alloc_bytes for r in rows)
    us = device_memory_us(facts)
    when = f", {fmt_us(us)} per step in those calls" if us else ""
    where = ""
    if top is not None and top.path:
        where = f"; most by this line ({top.device_allocs}×, {fmt_bytes(top.device_alloc_bytes)})"
    yield Finding(
        Code.ALLOCATOR_CHURN,
        Severity.WARNING,
        f"a warm call made {allocs} device allocations and {frees or 0} frees "
        f"({fmt_bytes(taken)} taken from the device){when}{where}: the caching allocator "
        "is not reusing its memory",
        path=top.path if top is not None and top.path else facts.function_path,
        line=top.line if top is not None and top.path else facts.function_line,
        try_=[
            "keep shapes fixed across steps (pad variable lengths to a few buckets)",
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            "do not call torch.cuda.empty_cache() in the loop",
        ],
        evidence={
            "device_allocs": allocs,
            "device_frees": frees or 0,
            "device_alloc_bytes": taken,
            "device_memory_us_per_step": round(us, 1),
        },
    )


def device_memory_us(facts: Facts) -> float:
    """Time per active step in the runtime calls that take or return device memory."""
    steps = facts.sidecar.active if facts.sidecar else 1
    total = sum(
        op.dur
        for op in facts.trace.launches
        if any(op.name.startswith(name) for name in DEVICE_MEMORY_CALLS)
    )
    return total / max(steps, 1)


def dominant_kind(row: MemoryLine) -> str:
    """The kind holding the most of a line's bytes at the peak."""
    return max(row.kinds.items(), key=lambda kv: kv[1])[0] if row.kinds else "temporaries"


def kinds_text(kinds: dict[str, int]) -> str:
    """``activations 1.0 MiB, temporaries 2.0 KiB``, largest first."""
    parts = sorted(kinds.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{k.replace('_', ' ')} {fmt_bytes(v)}" for k, v in parts)
