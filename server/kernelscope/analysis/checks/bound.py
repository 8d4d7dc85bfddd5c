"""KS101-KS106: the verdict, on the function's def line, with what to try."""

from __future__ import annotations

from collections.abc import Iterable

from kernelscope.analysis.checks.data_pipeline import PIPELINE_TRIES
from kernelscope.analysis.cpu_families import cpu_tries
from kernelscope.analysis.data_pipeline import pipeline_bound
from kernelscope.analysis.facts import Facts, Options
from kernelscope.analysis.syncs import has_syncs
from kernelscope.findings import Code, Finding, Severity


def find_bound(facts: Facts, options: Options) -> Iterable[Finding]:
    """KS101-KS104: the verdict, on the function's def line, with what to try."""
    del options
    v = facts.verdict
    evidence: dict[str, float | int | str] = {
        k: round(val, 4) if isinstance(val, float) else val
        for k, val in (
            ("gpu_busy_fraction", v.gpu_busy_fraction_unprofiled or v.gpu_busy_fraction),
            ("gpu_us_per_step", v.gpu_us_per_step),
            ("kernels_per_step", v.kernels_per_step),
            ("achieved_tflops", v.achieved_tflops),
            ("achieved_gbps", v.achieved_gbps),
            ("arithmetic_intensity", v.arithmetic_intensity),
            ("ridge_point", v.ridge_point),
        )
        if val is not None
    }
    path, line = facts.function_path, facts.function_line
    if v.bound == "overhead" and pipeline_bound(facts.loader, v.bound):
        yield Finding(
            Code.OVERHEAD_BOUND, Severity.WARNING, v.summary, path, line, PIPELINE_TRIES, evidence
        )
    elif v.bound == "overhead":
        tries = [
            "give each call more work: batch inputs (`kernelscope scale` shows time per item as "
            "the batch grows)",
            'capture the steady state in a CUDA Graph: torch.compile(mode="reduce-overhead") '
            "or torch.cuda.graphs",
            "torch.compile to fuse small ops into fewer launches",
        ]
        if has_syncs(facts):
            tries.append("remove the host-device syncs below (KS301): each one drains the queue")
        yield Finding(Code.OVERHEAD_BOUND, Severity.WARNING, v.summary, path, line, tries, evidence)
    elif v.bound == "memory":
        tries = _memory_tries(facts)
        yield Finding(Code.MEMORY_BOUND, Severity.WARNING, v.summary, path, line, tries, evidence)
    elif v.bound == "compute":
        tries: list[str] = []
        if facts.matmul_gpu_us.get("float", 0) > 0.2 * sum(facts.matmul_gpu_us.values()):
            tries.append(
                "run fp32 matmuls on tensor cores: bf16, or TF32 via "
                'torch.set_float32_matmul_precision("high")'
            )
        if _unfused_attention(facts):
            tries.append("use fused attention: torch.nn.functional.scaled_dot_product_attention")
        if v.achieved_tflops and v.peak_tflops and v.achieved_tflops >= 0.7 * v.peak_tflops:
            tries.append(
                "near the device's peak: only less work (smaller or sparser models, "
                "lower precision such as FP8) or more devices go faster"
            )
        yield Finding(Code.COMPUTE_BOUND, Severity.INFO, v.summary, path, line, tries, evidence)
    elif v.bound == "transfer":
        tries = [
            "copy with non_blocking=True and overlap the copy with compute (a side stream)",
            "keep the data on the device across calls; move only what changes",
        ]
        if any(r.bound == "transfer" and "Pageable" in r.name for r in facts.roofline):
            tries.insert(
                0,
                "pin the host memory (tensor.pin_memory(), DataLoader(pin_memory=True)): "
                "pageable copies stage through a bounce buffer at a fraction of the link's "
                "speed",
            )
        yield Finding(Code.TRANSFER_BOUND, Severity.WARNING, v.summary, path, line, tries, evidence)
    elif v.bound == "mixed":
        tries = [
            "no single fix: work on the top contributors named above (see the roofline and KS701)",
            "torch.compile fuses the memory-bound elementwise and normalization ops",
        ]
        yield Finding(Code.MIXED, Severity.INFO, v.summary, path, line, tries, evidence)
    else:
        yield _host_only(facts, evidence)


def _host_only(facts: Facts, evidence: dict[str, float | int | str]) -> Finding:
    """KS104: no GPU work; where the call's ops spent their CPU time, by family, and on a
    CPU run what to try there first."""
    summary = facts.verdict.summary
    families = facts.cpu_families
    tries: list[str] = []
    evidence |= {f"cpu_share_{f.replace(' ', '_')}": round(s, 3) for f, s in families}
    side = facts.sidecar
    if side is not None and side.device_type == "cpu":
        threads = side.device_properties.get("threads")
        tries = cpu_tries(families, threads if isinstance(threads, int) else None)
    return Finding(
        Code.HOST_ONLY, Severity.INFO, summary, facts.function_path, facts.function_line, tries,
        evidence,
    )  # fmt: skip


def _unfused_attention(facts: Facts) -> bool:
    """A softmax kernel and no fused attention kernel in the calls' GPU work: attention
    written out (or SDPA's math backend)."""
    kinds = {r.kind for r in facts.roofline}
    return "attention" not in kinds and any(r.name == "aten::_softmax" for r in facts.roofline)


def _memory_tries(facts: Facts) -> list[str]:
    """Fusing only where elementwise ops hold a share of the GPU time (a user's kernel that
    already streams near the bandwidth gains nothing from torch.compile); fewer bytes always."""
    rows = facts.roofline
    total = sum(r.gpu_us_per_step for r in rows) or 1.0
    elementwise = sum(r.gpu_us_per_step for r in rows if r.kind in ("elementwise", "copy"))
    tries = (
        ["fuse elementwise chains with torch.compile (see KS501)"]
        if elementwise >= 0.2 * total
        else []
    )
    tries.append("move fewer bytes: bf16/fp16 activations halve the traffic")
    v = facts.verdict
    if v.achieved_gbps and v.peak_gbps and v.achieved_gbps >= 0.7 * v.peak_gbps:
        tries.append(
            "near the memory's peak: only fewer bytes (a narrower dtype, a producer or "
            "consumer fused into the kernel) go faster"
        )
    return tries
