"""A few lines for a coding agent (the MCP server's tool results): the verdict first, then
the top findings at file:line with what to try; the structured result holds the rest."""

from __future__ import annotations

from collections.abc import Sequence

from kernelscope.analysis.experiments import Experiments
from kernelscope.findings import BOUND_CODES, Finding, Severity
from kernelscope.protocol import inputs_label
from kernelscope.render.compare import change_text
from kernelscope.render.slowed import slowed_rounds_note
from kernelscope.render.text import shorten
from kernelscope.report.compare import Comparison
from kernelscope.report.schema import Functions, OpRow, Report, TraceAnalysis
from kernelscope.units import cut, fmt_us

#: Findings shown, most severe first.
TOP_FINDINGS = 5
TOP_OPS = 3
_RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2, Severity.HINT: 3}


def report_summary(report: Report | TraceAnalysis) -> str:
    """A profile's or a trace's verdict, time, top ops and top findings."""
    if isinstance(report, Report):
        fn = report.function
        head = f"{fn.qualname} ({_where(fn.path, fn.line)}) on {report.device.name}"
        t = report.timing
        time = (
            f"time per call {fmt_us(t.unprofiled_us_per_call)} unprofiled"
            if t.unprofiled_reps > 0
            else "not timed unprofiled"
        )
        if report.device.type == "cuda":
            time += f"; GPU {fmt_us(t.cuda_us_per_step)} per step"
        verdict = report.verdict.summary if report.verdict else "no verdict (no steps)"
        cuda = report.device.type == "cuda"
        if report.call_site is not None:
            head += f"; {report.call_site.label}"
        elif report.inputs_from:
            head += f"; called alone, {inputs_label(report.inputs_from)}"
    else:
        head = f"trace {shorten(report.trace.path)} ({report.steps} steps)"
        time = ""
        verdict = report.verdict.summary
        cuda = report.device is not None and report.device != "cpu"
    lines = [f"verdict: {verdict}", head]
    if time:
        lines.append(time)
    if ops := _top_ops(report.ops, cuda):
        lines.append(f"top ops: {ops}")
    if isinstance(report, TraceAnalysis) and report.functions and report.functions.rows:
        lines.append(f"top functions: {_top_functions(report.functions, cuda)}")
    lines += findings_lines(report.findings)
    return "\n".join(lines)


def findings_lines(findings: Sequence[Finding], top: int = TOP_FINDINGS) -> list[str]:
    """The verdict's advice, then the other findings most severe first, each at file:line."""
    out: list[str] = []
    bound = next((f for f in findings if f.code in BOUND_CODES), None)
    if bound is not None and bound.try_:
        out.append(f"try: {'; '.join(bound.try_)}")
    rest = sorted(
        (f for f in findings if f.code not in BOUND_CODES), key=lambda f: _RANK[f.severity]
    )
    for f in rest[:top]:
        where = f" {_where(f.path, f.line)}" if f.path else ""
        advice = f" (try: {f.try_[0]})" if f.try_ else ""
        out.append(f"- {f.code}{where}: {f.message}{advice}")
    if len(rest) > top:
        out.append(f"… {len(rest) - top} more findings in the structured result")
    return out


def experiments_summary(e: Experiments) -> str:
    """A try: the best variant first, then each variant's speedup or why it has none."""
    best = next((v for v in e.variants if v.name == e.best), None)
    lines = [
        f"best: {best.summary}" if best else "best: none is faster beyond the noise",
        f"{e.qualname} ({_where(e.path, e.line)}) on {e.device}: "
        f"{fmt_us(e.baseline_us)} per call, {e.rounds} rounds in turns"
        + (f" ({note})" if (note := slowed_rounds_note(e)) else ""),
        *([e.call] if e.call else []),
    ]
    for v in e.variants:
        if v.speedup is None:
            where = f" at {_where(v.path or e.path, v.line)}" if v.line else ""
            lines.append(f"- {v.label}: {v.status}{where}: {v.why}")
        else:
            lines.append(
                f"- {v.label}: ×{v.speedup:.2f} ({v.ci_low or 0:.2f}–{v.ci_high or 0:.2f}), "
                f"results {v.results}"
            )
    return "\n".join(lines)


def comparison_summary(c: Comparison) -> str:
    """A diff: the change against the noise, then the op that moved most."""
    lines = [f"change: {change_text(c)}", f"{c.before} → {c.after}"]
    if c.ops:  # sorted by how much they moved
        d = c.ops[0]
        sign = "+" if d.delta_us >= 0 else "−"
        lines.append(
            f"moved most: {d.name} ({d.status}) {fmt_us(d.before_us)} → {fmt_us(d.after_us)} "
            f"per step ({sign}{fmt_us(abs(d.delta_us))}), calls {d.calls_before:g} → "
            f"{d.calls_after:g}"
        )
    if c.lines:
        d = c.lines[0]
        lines.append(
            f"line moved most: {_where(d.path, d.line)} {fmt_us(d.before_us)} → "
            f"{fmt_us(d.after_us)} per call  {cut(d.code, 60)}"
        )
    return "\n".join(lines)


def _top_ops(ops: Sequence[OpRow], cuda: bool) -> str:
    def cost(op: OpRow) -> float:
        return op.self_cuda_us if cuda else op.self_cpu_us

    total = sum(cost(op) for op in ops)
    if total <= 0:
        return ""
    top = sorted(ops, key=cost, reverse=True)[:TOP_OPS]
    return ", ".join(f"{op.name} {cost(op) / total:.0%}" for op in top)


def _top_functions(f: Functions, cuda: bool) -> str:
    """The costliest functions of a trace's Python frames, each at its def line."""
    cuda = cuda and f.gpu_us > 0
    out: list[str] = []
    for r in f.rows[:TOP_OPS]:
        where = (
            _where(r.local_path, r.local_line or r.line) if r.local_path else f"{r.path}:{r.line}"
        )
        cost = fmt_us(r.gpu_total_us) + " GPU" if cuda else fmt_us(r.cpu_total_us) + " CPU"
        out.append(f"{r.qualname or r.name} ({where}) {cost}")
    return ", ".join(out) + " in total (per line: profile live)"


def _where(path: str | None, line: int | None) -> str:
    where = shorten(path or "")
    return f"{where}:{line}" if line else where
