"""What-if experiments, judged: the speedup of each variant over the function's own calls,
with a confidence interval from the rounds they ran in turns, and which variants a verdict
suggests. Pure: the worker times, this decides."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

import msgspec

from kernelscope.analysis.verdict import Verdict
from kernelscope.protocol import VARIANT_LABELS, VARIANTS, TryFinished, VariantOutcome
from kernelscope.units import fmt_us

#: Two-sided 95 % Student t quantiles by degrees of freedom (beyond 30: the normal's 1.96).
_T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
        10: 2.23, 12: 2.18, 15: 2.13, 20: 2.09, 25: 2.06, 30: 2.04}  # fmt: skip
CONVOLUTIONS = ("aten::convolution", "aten::cudnn_convolution", "aten::_convolution")


class VariantResult(msgspec.Struct):
    """One variant: how much faster per item than the function, how sure, at what one-time
    cost, and whether it changed the results."""

    name: str
    label: str
    status: str
    summary: str
    why: str = ""
    path: str | None = None
    line: int | None = None
    us_per_call: float | None = None
    items: int = 1
    speedup: float | None = None
    """Baseline time per item over the variant's (geometric mean over the paired rounds)."""
    ci_low: float | None = None
    ci_high: float | None = None
    one_time_s: float | None = None
    one_time_what: str = ""
    results: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    tolerance: str = ""
    why_changed: str = ""

    @property
    def faster(self) -> bool:
        """Faster beyond the noise: the whole interval is above 1."""
        return self.status == "ok" and self.ci_low is not None and self.ci_low > 1.0

    @property
    def equal(self) -> bool:
        """Its results are the function's, within the dtype's tolerance."""
        return self.results == "equal"


class Experiments(msgspec.Struct):
    """A `try`: the function's time and each variant's, measured in turns on the same inputs."""

    path: str
    qualname: str
    line: int | None
    device: str
    method: str
    rounds: int
    baseline_us: float
    baseline_p10_us: float
    baseline_p90_us: float
    variants: list[VariantResult]
    best: str | None = None
    """The fastest variant that is faster beyond the noise, results equal first."""
    call: str = ""
    """With a program (--via): which call the variants were tried on (CallSite.label)."""
    slowed_rounds: int = 0
    """Rounds left out besides ``rounds``: the host slowed the timing thread's CPU."""
    slowed_kept: int = 0
    """Of ``rounds``, those the host slowed as well, kept in: too few ran at full speed."""
    reference_us: float | None = None
    """The timing thread's reference loop at its best (µs): its CPU's speed."""
    host_reference_us: float | None = None
    """The same loop at its best in the launcher's other workers on this host (µs)."""


def judge(finished: TryFinished, path: str, qualname: str, line: int | None) -> Experiments:
    """Speedups, intervals and summaries of a TryFinished."""
    base = finished.baseline_rounds_us
    results = [_variant(v, base) for v in finished.variants]
    winners = sorted(
        (r for r in results if r.faster), key=lambda r: (not r.equal, -(r.speedup or 0.0))
    )
    deciles = statistics.quantiles(base, n=10) if len(base) >= 2 else base * 9
    return Experiments(
        path=path,
        qualname=qualname,
        line=line,
        device=finished.device_name or finished.device_type,
        method=finished.method,
        rounds=len(base),
        slowed_rounds=finished.slowed_rounds,
        slowed_kept=finished.slowed_kept,
        reference_us=finished.reference_us,
        host_reference_us=finished.host_reference_us,
        baseline_us=statistics.median(base) if base else 0.0,
        baseline_p10_us=deciles[0] if base else 0.0,
        baseline_p90_us=deciles[-1] if base else 0.0,
        variants=results,
        best=winners[0].name if winners else None,
        call=finished.call_site.label if finished.call_site is not None else "",
    )


def _variant(v: VariantOutcome, base: Sequence[float]) -> VariantResult:
    label = VARIANT_LABELS.get(v.name, v.name)
    result = VariantResult(
        name=v.name,
        label=label,
        status=v.status,
        summary="",
        why=v.why,
        path=v.path,
        line=v.line,
        items=v.items,
        one_time_s=v.one_time_s,
        one_time_what=v.one_time_what,
        results=v.results,
        max_abs_err=v.max_abs_err,
        max_rel_err=v.max_rel_err,
        tolerance=v.tolerance,
        why_changed=v.why_changed,
    )
    if v.status == "ok" and v.rounds_us and base:
        result.us_per_call = statistics.median(v.rounds_us)
        result.speedup, result.ci_low, result.ci_high = paired_speedup(base, v.rounds_us, v.items)
    elif v.status == "ok":
        result.status, result.why = "failed", "no rounds were timed"
    result.summary = summary(result)
    return result


def paired_speedup(
    base: Sequence[float], variant: Sequence[float], items: int = 1
) -> tuple[float, float, float]:
    """Speedup per item and its 95 % interval: round i timed both, so each round gives one
    ratio; their logs are averaged (a geometric mean) with Student's t over the rounds."""
    logs = [math.log(b * items / v) for b, v in zip(base, variant, strict=False) if b > 0 and v > 0]
    if not logs:
        return 1.0, 1.0, 1.0
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), math.exp(mean), math.exp(mean)
    half = _t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def _t95(df: int) -> float:
    if df > 30:
        return 1.96
    return _T95[max(k for k in _T95 if k <= df)]


def summary(r: VariantResult) -> str:
    """``torch.compile: 1.84× faster (measured, 2.1 s to compile), results equal``."""
    if r.speedup is None:
        return f"{r.label}: {'skipped' if r.status == 'skipped' else 'failed'}: {r.why}"
    low, high = r.ci_low or r.speedup, r.ci_high or r.speedup
    per = " per item" if r.items > 1 else ""
    if low > 1.0:
        pace = f"{r.speedup:.2f}× faster{per}"
    elif high < 1.0:
        pace = f"{1 / r.speedup:.2f}× slower{per}"
    else:
        pace = f"no faster{per} (×{low:.2f}–{high:.2f}, within the noise)"
    once = ""
    if r.one_time_s is not None and r.one_time_s >= 0.05:
        what = "to compile" if r.one_time_what == "compile" else "for the first call"
        once = f", {r.one_time_s:.1f} s {what}"
    return f"{r.label}: {pace} (measured{once}), {_results_text(r)}"


def _results_text(r: VariantResult) -> str:
    if r.results == "equal":
        return "results equal"
    if r.results == "changed":
        err = f"max rel err {r.max_rel_err:.1e}" if r.max_rel_err is not None else "different"
        return (
            f"changes results ({err}; tolerance {r.tolerance})"
            if r.tolerance
            else "changes results"
        )
    return r.results or "results not compared"


def suggested(verdict: Verdict | None, op_names: Iterable[str], device_type: str) -> list[str]:
    """The variants a verdict supports, in VARIANTS order: overhead → CUDA Graphs and
    torch.compile; memory, and host (a CPU run) → torch.compile; compute with fp32 matmuls
    → TF32 and bf16; convolutions → channels_last; and a bigger batch for any."""
    names = set(op_names)
    bound = verdict.bound if verdict else ""
    wanted = {"batch2"}
    if bound in ("overhead", "mixed", "memory", "host"):
        wanted.add("compile")
    if bound in ("overhead", "mixed"):
        wanted.add("graphs")
    if bound in ("compute", "mixed") and verdict is not None and verdict.matmul_dtype == "float32":
        wanted |= {"tf32", "bf16"}
    if names & set(CONVOLUTIONS):
        wanted.add("channels_last")
    if device_type != "cuda":
        wanted -= {"graphs", "tf32"}
    return [v for v in VARIANTS if v in wanted]


def baseline_text(e: Experiments) -> str:
    """``1.23 ms per call (p10–p90 1.20 ms–1.31 ms, 12 rounds)``."""
    return (
        f"{fmt_us(e.baseline_us)} per call (p10–p90 {fmt_us(e.baseline_p10_us)}–"
        f"{fmt_us(e.baseline_p90_us)}, {e.rounds} rounds)"
    )
