"""A run's report and findings as the editor shows them: diagnostics, hover, lenses, hints.

Pure functions from a RunRecord (and the current source) to lsprotocol types; no I/O.
Lines are 1-based in reports and 0-based in LSP.
"""

from __future__ import annotations

import datetime
import json
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
from lsprotocol import types as lsp

from kernelscope.columns import table
from kernelscope.findings import DOCS_PAGE, Code, Finding, Severity
from kernelscope.notebooks import NotebookModule
from kernelscope.protocol import inputs_label
from kernelscope.pyfunctions import FunctionDef
from kernelscope.units import cut, fmt_us

if TYPE_CHECKING:  # only attributes are read: the analysis modules load after `initialize`
    from kernelscope.analysis.experiments import Experiments
    from kernelscope.app.history import Delta
    from kernelscope.app.store import RunRecord
    from kernelscope.report.schema import LineRow, Report, Timing

SOURCE = "kernelscope"
_SEVERITY = {
    Severity.ERROR: lsp.DiagnosticSeverity.Error,
    Severity.WARNING: lsp.DiagnosticSeverity.Warning,
    Severity.INFO: lsp.DiagnosticSeverity.Information,
    Severity.HINT: lsp.DiagnosticSeverity.Hint,
}


@dataclass(frozen=True)
class ViewOptions:
    """How much to show."""

    top_lines: int = 5


def _line_range(line: int, text: str = "") -> lsp.Range:
    """The whole of 1-based `line`, from its first non-blank character."""
    start = len(text) - len(text.lstrip()) if text else 0
    return lsp.Range(lsp.Position(line - 1, start), lsp.Position(line - 1, max(len(text), start)))


def _text(lines: list[str], line: int) -> str:
    return lines[line - 1] if 0 < line <= len(lines) else ""


def finding_diagnostic(f: Finding, lines: list[str], fallback_line: int) -> lsp.Diagnostic:
    """One finding as a diagnostic on its line (the def line when it has none)."""
    line = f.line or fallback_line
    message = f.message
    if f.try_:
        message += "\nTry: " + "; ".join(f.try_)
    severity = _SEVERITY[f.severity]
    if f.code in (Code.COMPUTE_BOUND, Code.HOST_ONLY):
        severity = lsp.DiagnosticSeverity.Information
    return lsp.Diagnostic(
        range=_line_range(line, _text(lines, line)),
        message=message,
        severity=severity,
        code=f.code,
        code_description=lsp.CodeDescription(href=f.docs),
        source=SOURCE,
    )


def run_diagnostics(
    record: RunRecord,
    path: str,
    lines: list[str],
    options: ViewOptions,
    delta: Delta | None = None,
) -> list[lsp.Diagnostic]:
    """Diagnostics of one run that belong to the file at `path` (KS802 when it is slower than
    the run before it beyond the noise), each ending with which run it comes from."""
    report = record.report
    def_line = report.function.line
    out: list[lsp.Diagnostic] = []
    own_file = path == report.function.path
    if own_file:
        out.append(
            lsp.Diagnostic(
                range=_line_range(def_line, _text(lines, def_line)),
                message=function_summary(report),
                severity=lsp.DiagnosticSeverity.Information,
                code=Code.FUNCTION_TIMES,
                source=SOURCE,
            )
        )
    if own_file and delta is not None and delta.comparison.regression:
        top = f"; most: {delta.top}" if delta.top else ""
        out.append(
            lsp.Diagnostic(
                range=_line_range(def_line, _text(lines, def_line)),
                message=f"slower than {delta.comparison.before}: {delta.text}{top}",
                severity=lsp.DiagnosticSeverity.Warning,
                code=Code.REGRESSION,
                code_description=lsp.CodeDescription(href=f"{DOCS_PAGE.as_uri()}#ks802"),
                source=SOURCE,
            )
        )
    for f in report.findings:
        if (f.path or report.function.path) == path and (own_file or f.path):
            out.append(finding_diagnostic(f, lines, def_line))
    for row in costliest(report, path, options.top_lines):
        out.append(
            lsp.Diagnostic(
                range=_line_range(row.line, _text(lines, row.line)),
                message=line_summary(report, row),
                severity=lsp.DiagnosticSeverity.Information,
                code=Code.COSTLY_LINE,
                source=SOURCE,
            )
        )
    label = f"\n— {run_label(record)}"
    return [attrs.evolve(d, message=d.message + label) for d in out]


def one_per_line(
    runs: list[tuple[RunRecord, list[lsp.Diagnostic]]], path: str
) -> list[lsp.Diagnostic]:
    """Where runs of several functions put diagnostics of one code on one line (a function and
    its caller both profiled): the costliest run's, naming the others and their figures in its
    message and related information; their own text stays in the line's hover."""
    groups: dict[tuple[str, int], dict[str, tuple[float, RunRecord, list[lsp.Diagnostic]]]] = {}
    for record, diags in runs:
        for d in diags:
            line = d.range.start.line
            of_run = groups.setdefault((str(d.code), line), {})
            cost = line_cost(record, path, line + 1)
            of_run.setdefault(record.run_id, (cost, record, []))[2].append(d)
    out: list[lsp.Diagnostic] = []
    for of_run in groups.values():
        ranked = sorted(of_run.values(), key=lambda x: x[0], reverse=True)
        _, _, kept = ranked[0]
        others = ranked[1:]
        if others:
            also = ", ".join(f"`{r.qualname}` {_cost_text(r, c)}" for c, r, _ in others)
            related = [
                lsp.DiagnosticRelatedInformation(
                    lsp.Location(Path(r.path).as_uri(), _line_range(r.report.function.line)),
                    ds[0].message,
                )
                for _, r, ds in others
            ]
            first = attrs.evolve(
                kept[0],
                message=f"{kept[0].message}\nalso on this line: {also} (their runs in the hover)",
                related_information=related,
            )
            kept = [first, *kept[1:]]
        out += kept
    return out


def line_cost(record: RunRecord, path: str, line: int) -> float:
    """What a run measured on one 1-based line of `path`: CUDA time on a CUDA run, else self
    CPU time, per call; the function's time per step where the line has no row."""
    r = record.report
    cuda = r.device.type == "cuda"
    row = next((x for x in r.lines if x.line == line and x.path == path), None)
    if row is not None:
        return row.cuda_us if cuda else row.self_cpu_us
    return r.timing.cuda_us_per_step if cuda else r.timing.cpu_us_per_step


def _cost_text(record: RunRecord, cost: float) -> str:
    return f"{fmt_us(cost)} {'CUDA' if record.report.device.type == 'cuda' else 'CPU'}"


def run_label(record: RunRecord) -> str:
    """Which run: `` `Block.forward` run 2026-12-02 10:02 UTC on cuda:0 (NVIDIA H200),
    via train.py, call 3, captured``."""
    return (
        f"`{record.qualname}` run {_stamp(record.created)} on {device_label(record.report)}, "
        f"{how_label(record.report)}"
    )


def device_label(report: Report, short: bool = False) -> str:
    """`cuda:0 (NVIDIA H200) on gpu-box`; short: `cuda:0 on gpu-box`."""
    d = report.device
    where = d.type + (f":{d.index}" if d.index is not None else "")
    if not short and d.name and d.name != d.type:
        where += f" ({d.name})"
    return where + (f" on {report.runner.remote}" if report.runner.remote else "")


def how_label(report: Report) -> str:
    """How the function was called: the program's call, an imported trace, or on its own
    with its inputs from a provider (named) or its defaults."""
    if report.call_site is not None:
        return report.call_site.label
    if report.runner.host == IMPORTED:
        return "imported trace"
    return f"called alone, {inputs_label(report.inputs_from)}"


#: A line holding this share of the memory peak gets it in its inlay hint.
MEMORY_HINT_SHARE = 0.1
#: Runner.host of a report built from an imported trace (report/build.py).
IMPORTED = "(imported trace)"


def costliest(report: Report, path: str, top: int) -> list[LineRow]:
    """The top lines of a file by CUDA time (CPU time on CPU runs)."""
    cuda = report.device.type == "cuda"
    rows = [r for r in report.lines if r.path == path]
    rows.sort(key=lambda r: r.cuda_us if cuda else r.self_cpu_us, reverse=True)
    return rows[:top]


def function_summary(report: Report) -> str:
    """The def line's one-line summary of the whole function."""
    t = report.timing
    cuda = f"{fmt_us(t.cuda_us_per_step)} CUDA · " if report.device.type == "cuda" else ""
    return (
        f"{report.function.qualname}: {cuda}{fmt_us(t.cpu_us_per_step)} CPU per step "
        f"(profiled); " + unprofiled_clause(t) + f" on {report.device.name}"
    )


def unprofiled_clause(t: Timing) -> str:
    """The unprofiled figure as the def line and the hover say it, with how much the host
    slowed the timing thread where it did so throughout (the figure then reads high)."""
    if t.unprofiled_reps <= 0:
        return "not timed unprofiled"
    f = slowed_throughout(t)
    slowed = f" (the host ran its thread {f:.1f}x slower throughout: reads high)" if f else ""
    return f"{fmt_us(t.unprofiled_us_per_call)} per call unprofiled{slowed}"


def slowed_throughout(t: Timing) -> float | None:
    """How much slower the host ran the timing thread where it did so for every timed call
    (no fast block to leave the others out by); None where it did not."""
    s = t.unprofiled_slowed
    return s.factor if s is not None and s.throughout else None


def line_summary(report: Report, row: LineRow) -> str:
    """One attributed line: its CUDA and self/total CPU time per call (and the line
    tracer's own time taken out of it, where that was most of it)."""
    cuda = f"{fmt_us(row.cuda_us)} CUDA · " if report.device.type == "cuda" else ""
    ops = f" — {', '.join(row.top_ops)}" if row.top_ops else ""
    traced = (
        f" (the line tracer's own {fmt_us(row.tracer_us)} taken out)"
        if row.tracer_us > row.self_cpu_us
        else ""
    )
    own = (
        f"under {fmt_us(row.tracer_noise_us)} CPU self (lost in the line tracer's own time)"
        if row.below_noise
        else f"{fmt_us(row.self_cpu_us)} CPU self"
    )
    return f"{cuda}{own}, {fmt_us(row.cpu_total_us)} total per call{traced}{ops}"


def lens_title(record: RunRecord, delta: Delta | None = None) -> str:
    """After a run: `1.45 ms CUDA/step · compute-bound · 94 % of peak · cuda:0 10:04 UTC ·
    −12 % vs 10:02:11` (`, via train.py, call 3` after the time for a run through a program)."""
    r = record.report
    v = r.verdict
    if r.device.type == "cuda":
        head = f"{fmt_us(r.timing.cuda_us_per_step)} CUDA/step"
    elif r.timing.unprofiled_reps > 0:
        f = slowed_throughout(r.timing)
        head = f"{fmt_us(r.timing.unprofiled_us_per_call)}/call" + (
            f" (host slowed {f:.1f}x)" if f else ""
        )
    else:  # in place with --skip 1: no call timed; the profiled CPU per step
        head = f"{fmt_us(r.timing.cpu_us_per_step)} CPU/step profiled"
    parts = [head]
    if v is not None:
        parts.append(f"{v.bound}-bound")
        if v.bound == "compute" and v.achieved_tflops and v.peak_tflops:
            parts.append(f"{v.achieved_tflops / v.peak_tflops:.0%} of peak")
        elif v.bound == "memory" and v.achieved_gbps and v.peak_gbps:
            parts.append(f"{v.achieved_gbps / v.peak_gbps:.0%} of bandwidth")
        elif v.bound == "overhead" and v.gpu_busy_fraction is not None:
            busy = v.gpu_busy_fraction_unprofiled or v.gpu_busy_fraction
            parts.append(f"GPU busy {busy:.0%}")
    ran = f"{device_label(r, short=True)} {_stamp(record.created, short=True)}"
    if r.call_site is not None:
        site = r.call_site
        ran += f", via {site.via.split()[0]}, " + (
            f"call {site.call}" if site.captured else "in place"
        )
    elif r.runner.host == IMPORTED:
        ran += ", imported"
    elif r.inputs_from and r.inputs_from != "defaults":
        ran += f", inputs from {r.inputs_from.rpartition('::')[2]}"
    parts.append(ran)
    if delta is not None:
        parts.append(delta.short)
        memory = delta.comparison.memory
        if memory is not None and memory.regression:
            parts.append(f"memory peak {memory.change:+.0%}")
    return " · ".join(parts)


def inlay_hints(
    record: RunRecord, fn: FunctionDef, path: str, lines: list[str]
) -> list[lsp.InlayHint]:
    """At the end of each attributed line of `fn`: its share of CUDA and CPU time, and of
    the memory peak where it holds 10 % or more."""
    from kernelscope.render.lines import profiled_lines_note  # after a run only
    from kernelscope.render.memory import line_memory_text, peak_share

    report = record.report
    inflated = profiled_lines_note(report)
    rows = [r for r in report.lines if r.path == path and fn.contains(r.line)]
    cuda_total = sum(r.cuda_us for r in report.lines) or 0.0
    cpu_total = sum(r.self_cpu_us for r in report.lines) or 0.0
    memory = report.memory_pass
    heavy: dict[int, float] = {}  # lines holding 10 % or more of the memory peak
    for m in memory.lines if memory else []:
        if memory and m.path == path and fn.contains(m.line):
            share = peak_share(memory, path, m.line)
            if share >= MEMORY_HINT_SHARE:
                heavy[m.line] = share
    hints: list[lsp.InlayHint] = []
    by_line = {r.line: r for r in rows}
    for line in sorted({*by_line, *heavy}):
        row = by_line.get(line)
        parts: list[str] = []
        if row is not None and cuda_total > 0:
            parts.append(f"{row.cuda_us / cuda_total:.0%} CUDA")
        if row is not None and cpu_total > 0:
            parts.append(f"{row.self_cpu_us / cpu_total:.0%} CPU")
        if line in heavy:
            parts.append(f"{heavy[line]:.0%} of memory peak")
        if not parts:
            continue
        text = _text(lines, line)
        tips = [line_summary(report, row)] if row is not None else []
        if row is not None and inflated:
            tips.append(f"({inflated})")
        if memory is not None:
            tips += line_memory_text(memory, path, line)
        hints.append(
            lsp.InlayHint(
                position=lsp.Position(line - 1, len(text)),
                label="  " + " · ".join(parts),
                kind=lsp.InlayHintKind.Type,
                padding_left=True,
                tooltip="\n".join([*tips, run_label(record)]),
            )
        )
    return hints


def command_link(command: str, *args: str) -> str:
    """A markdown link target that runs an editor command."""
    return f"command:{command}?{urllib.parse.quote(json.dumps(list(args)))}"


def hover_markdown(record: RunRecord, line: int | None = None, delta: Delta | None = None) -> str:
    """The last run: times, verdict, top ops, dead window, device, when, a Perfetto link."""
    from kernelscope.render.lines import profiled_lines_note
    from kernelscope.render.memory import (  # after a run only
        line_memory_text,
        memory_delta_lines,
        memory_summary,
    )

    r = record.report
    t, d = r.timing, r.dead_window
    cuda = r.device.type == "cuda"
    out = [
        f"**kernelscope · {r.function.qualname}** — last run {_when(record.created)} "
        f"({_stamp(record.created)}) on {device_label(r)}",
        "",
        f"*{how_label(r)}*",
        "",
    ]
    row = next(
        (x for x in r.lines if line is not None and x.line == line and x.path == record.path), None
    )
    if row is not None and line != r.function.line:
        out += [f"**line {line}:** {line_summary(r, row)}", ""]
        inflated = profiled_lines_note(r)
        out += [f"*{inflated[0].upper()}{inflated[1:]}.*", ""] if inflated else []
    if r.memory_pass is not None and line is not None and line != r.function.line:
        out += [f"**memory, line {line}:** {t}" for t in
                line_memory_text(r.memory_pass, record.path, line)]  # fmt: skip
    out.append(
        (f"**{fmt_us(t.cuda_us_per_step)} CUDA** · " if cuda else "")
        + f"{fmt_us(t.cpu_us_per_step)} CPU per step (profiled) · "
        + unprofiled_clause(t)
    )
    if delta is not None:
        top = f" Most: `{delta.top}`." if delta.top else ""
        out += ["", f"**vs {delta.comparison.before}:** {delta.text}.{top}"]
        memory = delta.comparison.memory
        if memory is not None and (memory.regression or memory.lines):
            out += ["", f"**Memory vs {delta.comparison.before}:** "
                    + "; ".join(t.strip() for t in memory_delta_lines(memory))]  # fmt: skip
    if r.verdict:
        out += ["", f"**Verdict:** {r.verdict.summary}"]
    if r.memory_pass is not None:
        out += ["", f"**Memory:** {memory_summary(r.memory_pass)}"]
    if r.ops:
        rows = [
            [
                cut(o.name, 44),
                str(o.calls),
                fmt_us(o.self_cpu_us),
                fmt_us(o.cpu_total_us),
                fmt_us(o.self_cuda_us) if cuda else "-",
                fmt_us(o.cuda_total_us) if cuda else "-",
            ]
            for o in r.ops[:5]
        ]
        head = ["op", "calls", "self CPU", "CPU total", "self CUDA", "CUDA total"]
        out += ["", "```text", *table(head, rows), "```"]
        out.append(f"\n(totals over {r.steps.active} active steps)")
    cold = f"cold call {fmt_us(d.first_call_us)}"
    if d.entry_to_first_kernel_us is not None:
        cold += f", entry → first kernel {fmt_us(d.entry_to_first_kernel_us)}"
    out += ["", cold]
    where = f"{r.device.type}" + (f":{r.device.index}" if r.device.index is not None else "")
    remote = f" via {r.runner.remote}" if r.runner.remote else ""
    out += [f"{where} ({r.device.name}) on {r.runner.host}{remote} · torch {r.runner.torch}"]
    out += ["", f"[Open trace in Perfetto]({command_link('kernelscope.openTrace', record.run_id)})"]
    return "\n".join(out)


def others_markdown(records: list[RunRecord], path: str, line: int) -> str:
    """The hover's lines for what other functions' runs measured on one line (1-based)."""
    out: list[str] = []
    for record in records:
        row = next((x for x in record.report.lines if x.line == line and x.path == path), None)
        if row is not None:
            out.append(f"- {run_label(record)}: {line_summary(record.report, row)}")
    if not out:
        return ""
    return "\n".join([f"**line {line}, in the runs of other functions:**", "", *out])


def _stamp(created: str, short: bool = False) -> str:
    """`2026-12-02 10:02 UTC`; short: `10:02 UTC` on the day it is now, `12-01 10:02 UTC`
    before."""
    try:
        then = datetime.datetime.fromisoformat(created).astimezone(datetime.UTC)
    except ValueError:
        return created
    if not short:
        return then.strftime("%Y-%m-%d %H:%M UTC")
    today = datetime.datetime.now(datetime.UTC).date() == then.date()
    return then.strftime("%H:%M UTC" if today else "%m-%d %H:%M UTC")


def _when(created: str) -> str:
    try:
        then = datetime.datetime.fromisoformat(created)
    except ValueError:
        return created
    seconds = (datetime.datetime.now(datetime.UTC) - then).total_seconds()
    if seconds < 90:
        return "just now"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    return then.strftime("%Y-%m-%d %H:%M UTC")


#: Variants a quick fix can write into the source: the decorator that does it.
DECORATORS = {
    "compile": "@torch.compile",
    "graphs": '@torch.compile(mode="reduce-overhead")',
}


def experiment_diagnostics(exp: Experiments, path: str, lines: list[str]) -> list[lsp.Diagnostic]:
    """KS801 per variant: on the def line, or on the user's line where one failed."""
    out: list[lsp.Diagnostic] = []
    for v in exp.variants:
        at = v.line if v.status == "failed" and v.line and v.path == path else exp.line or 1
        severity = (
            lsp.DiagnosticSeverity.Warning
            if v.status == "failed"
            else lsp.DiagnosticSeverity.Information
        )
        out.append(
            lsp.Diagnostic(
                range=_line_range(at, _text(lines, at)),
                message=v.summary,
                severity=severity,
                code=Code.WHAT_IF,
                source=SOURCE,
                data={
                    "qualname": exp.qualname,
                    "variant": v.name,
                    "apply": v.name in DECORATORS and v.faster and v.equal,
                },
            )
        )
    return out


def experiment_markdown(exp: Experiments) -> str:
    """The hover's lines of the last experiment: each variant, best first."""
    from kernelscope.render.slowed import slowed_rounds_note  # after a try only

    best = [v for v in exp.variants if v.name == exp.best]
    rest = [v for v in exp.variants if v.name != exp.best]
    note = slowed_rounds_note(exp)
    slowed = f"; {note}" if note else ""
    out = ["", f"**Tried** (in turns with the function, {exp.rounds} rounds{slowed}):"]
    out += [f"- {v.summary}" for v in [*best, *rest]]
    return "\n".join(out)


def note_diagnostics(module: NotebookModule) -> list[lsp.Diagnostic]:
    """What a notebook's module left out (magics, cells not in Python), as hints on their
    lines, in module lines."""
    out: list[lsp.Diagnostic] = []
    for note in module.notes:
        span = module.span_of(note.uri)
        if span is None:
            continue
        line = span.first + note.line - 1
        out.append(
            lsp.Diagnostic(
                range=_line_range(line),
                message=f"not profiled as written: {note.message}",
                severity=lsp.DiagnosticSeverity.Hint,
                source=SOURCE,
            )
        )
    return out
