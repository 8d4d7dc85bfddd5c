"""Plain-text rendering of reports and failures for the terminal."""

from __future__ import annotations

import os
from collections.abc import Sequence

from kernelscope.analysis.checks.measurement import CONTENDED
from kernelscope.analysis.collectives import Communication
from kernelscope.analysis.functions import MODULE_CODE
from kernelscope.analysis.roofline import OpRoof
from kernelscope.columns import table
from kernelscope.findings import BOUND_CODES, Finding
from kernelscope.protocol import Counters, ProfileFailed, inputs_label
from kernelscope.render.lines import profiled_lines_note
from kernelscope.render.memory import memory_section, oom_section
from kernelscope.report.schema import (
    FunctionRow,
    Functions,
    OpRow,
    Report,
    Timing,
    TraceAnalysis,
)
from kernelscope.units import cut, fmt_bytes, fmt_rate, fmt_us, stages_line

DASH = "-"
__all__ = [
    "fmt_us",
    "render_failure",
    "render_report",
    "render_trace_analysis",
    "shorten",
    "table",
]
#: Failures of a program run with --via: its output is the program's, not the function's.
PROGRAM_FAILURES = frozenset(
    {"entry_failed", "not_called", "too_few_calls", "child_call", "ranks_apart"}
)
MARKS = {"error": "✖", "warning": "▲", "info": "●", "hint": "·"}


def shorten(path: str, base: str | None = None) -> str:
    """A path relative to `base` (the cwd by default) when that is shorter."""
    try:
        rel = os.path.relpath(path, base or os.getcwd())
    except ValueError:
        return path
    return rel if len(rel) < len(path) else path


def _inputs(report: Report) -> list[str]:
    """Where a function called alone got its inputs (a program's call: its call line)."""
    if not report.inputs_from or report.call_site is not None:
        return []
    return [f"called    alone, {inputs_label(report.inputs_from)}"]


def call_site_lines(report: Report) -> list[str]:
    """The `call` line of a program's call (--via), and what the run did besides."""
    site = report.call_site
    if site is None:
        return []
    ran = "" if site.reused else f" (the program ran {site.entry_s:.1f} s to reach it)"
    out = [f"call      {site.label}{ran}"]
    if site.captured:
        out.append(
            "          timed replayed back to back, its caches warm from call to call (in the "
            "program the rest of the step evicts them): --in-place times the program's own calls"
        )
    if site.sites:
        lines = ", ".join(
            f"{shorten(s.path)}:{s.line} ({s.calls} {site.step}{'' if s.calls == 1 else 's'}, "
            f"median {fmt_us(s.median_us)})"
            for s in site.sites
        )
        first = site.sites[0]
        out.append(
            f"          the timed {site.step}s came from {len(site.sites)} lines: {lines}; the "
            f"figure is their median: --from {shorten(first.path)}:{first.line} profiles one "
            "line's"
        )
    if site.rerun_why:
        out.append(f"          the program ran again, not its kept capture: {site.rerun_why}")
    if site.wrote:
        out.append(f"          it ran for real and wrote {', '.join(site.wrote)}")
    if site.saved and site.kept:
        out.append(
            f"          kept in {shorten(site.saved)}: the next profile of this call replays it "
            "while the program's files are unchanged (--fresh runs the program again)"
        )
    elif site.saved:
        out.append(f"          saved to {shorten(site.saved)}")
    if site.save_error:
        out.append(f"          {'not kept' if site.kept else 'not saved'}: {site.save_error}")
    t = report.timing
    if t.replayed_from:
        why = f" ({t.replay_note})" if t.replay_note else ""
        out.append(f"          the clean worker's timing: {t.replayed_from}{why}")
    return out


def render_report(
    report: Report, max_ops: int = 15, max_lines: int = 10, stages: bool = False
) -> str:
    """The human report: device, per-step times, cold call, ops, lines, trace path; with
    ``stages``, how long each stage of the job took."""
    f, t, d = report.function, report.timing, report.dead_window
    cuda = report.device.type == "cuda"
    out = [
        f"kernelscope · {f.qualname}  ({shorten(f.path)}:{f.line})",
        f"device    {report.device.type}"
        + (f":{report.device.index}" if report.device.index is not None else "")
        + f" ({report.device.name})"
        + (
            f" · {report.device.threads} thread{'' if report.device.threads == 1 else 's'}"
            if report.device.threads
            else ""
        )
        + f" · host {report.runner.host}"
        + (f" via {report.runner.remote}" if report.runner.remote else "")
        + f" · python {report.runner.python} · torch {report.runner.torch}"
        + (f" · CUDA {report.runner.cuda}" if report.runner.cuda else ""),
        f"schedule  wait {report.steps.wait} · warmup {report.steps.warmup}"
        f" · active {report.steps.active}" + _shortened(report),
        *([f"          {report.steps.recording}"] if report.steps.recording else []),
        *call_site_lines(report),
        *_inputs(report),
        "",
        f"per step    CPU {fmt_us(t.cpu_us_per_step)}"
        + (f" · CUDA {fmt_us(t.cuda_us_per_step)}" if cuda else "")
        + f" · wall {fmt_us(t.wall_us_per_step)}  (profiled)",
        _unprofiled(report),
        *_settling(report),
        *_few_in_place(report),
        *_slowed(t, _step_name(report)),
        f"cold call   {fmt_us(d.first_call_us)}"
        + (f" · entry → first kernel {fmt_us(d.entry_to_first_kernel_us)}" if cuda else "")
        + (f" · compiling {fmt_us(d.compile_us)}" if d.compile_us else "")
        + (" · fresh worker" if d.process_fresh else " · warm worker")
        + (f" · CUDA context {fmt_us(d.cuda_init_us)} at worker start" if d.cuda_init_us else "")
        + (
            " · the loop's first iteration, with what the program runs in it alone (an eval "
            "or a log at iteration 0)"
            if _step_name(report) == "iteration"
            else ""
        ),
    ]
    if t.gpu is not None:
        g = t.gpu
        out.append(
            f"gpu (NVML) SM {g.sm_clock_mhz:.0f}/{g.sm_clock_max_mhz:.0f} MHz · memory "
            f"{g.mem_clock_mhz:.0f}/{g.mem_clock_max_mhz:.0f} MHz · {g.power_w:.0f} W · "
            f"utilization {g.utilization_pct:.0f} % (NVML's own average, over a period that "
            "can be longer than the timing)"
        )
    if report.memory:
        out.append(
            f"memory      peak {report.memory.peak_allocated_bytes / 2**20:.1f} MiB allocated"
        )
    out += communication_lines(report.communication)
    out += _verdict(report.verdict.summary if report.verdict else None, report.findings)
    out += _roofline(report.roofline)
    out += counters_lines(report.counters, report.verdict.kernels_per_step if report.verdict else 0)
    steps = report.steps.active
    out += ["", f"ops (totals over {steps} active step{'s' if steps != 1 else ''})"]
    out += _ops_table(report.ops, cuda, max_ops)
    if report.lines:
        out += ["", "costliest lines (per call, from a traced pass)" + _tracer_note(report)]
        out += _profiled_lines_note(report)
        out += table(
            ["line", "self CPU", "CPU total", *(["CUDA"] if cuda else []), "code"],
            [
                [
                    f"{shorten(r.path)}:{r.line}",
                    f"< {fmt_us(r.tracer_noise_us)}" if r.below_noise else fmt_us(r.self_cpu_us),
                    fmt_us(r.cpu_total_us),
                    *([fmt_us(r.cuda_us)] if cuda else []),
                    cut(r.code, 60),
                ]
                for r in report.lines[:max_lines]
            ],
            align="lrrrl" if cuda else "lrrl",
        )
    if report.memory_pass is not None:
        out += ["", *memory_section(report.memory_pass)]
    out += _printed(SETUP_OUTPUT, report.setup_output, report.setup_output_truncated)
    whose = "program" if report.call_site else "function"
    out += _printed(f"output of the {whose}", report.output, report.output_truncated)
    out += ["", f"trace       {shorten(report.trace.path)}"]
    if stages and report.stages_s:
        out.append(f"stages      {stages_line(report.stages_s)}")
    return "\n".join(out)


#: The heading of what the import and the input provider printed, apart from the function's.
SETUP_OUTPUT = "printed by the import and the input provider, before the call"


def _printed(heading: str, text: str, truncated: bool, last: int = 10) -> list[str]:
    """The last lines of some output under its heading; nothing when it is empty."""
    if not text.strip():
        return []
    tail = text.rstrip("\n").splitlines()[-last:]
    more = " (truncated)" if truncated else ""
    return ["", f"{heading} (last {len(tail)} line{'s' if len(tail) != 1 else ''}{more})"] + [
        "  " + ln for ln in tail
    ]


def communication_lines(c: Communication | None) -> list[str]:
    """Per call: time in collectives, how much of it compute hid, idle; the costliest."""
    if c is None:
        return []
    out = [
        f"collectives {fmt_us(c.comm_us)} per call"
        + (f" on rank {c.rank} of {c.world_size}" if c.rank is not None else "")
        + f" ({c.backend}) · {c.overlap_share:.0%} hidden under compute · idle {fmt_us(c.idle_us)}"
    ]
    for row in c.collectives[:3]:
        size = fmt_bytes(row.bytes) if row.bytes else "size unknown"
        speed = (
            f", bus {fmt_rate(row.busbw_gbps)} (algorithm {fmt_rate(row.algbw_gbps)})"
            if row.bytes
            else ""
        )
        out.append(
            f"            {row.kind} {row.dtype} {size} × {row.calls}: {fmt_us(row.us)}{speed}"
        )
    return out


def _verdict(summary: str | None, findings: list[Finding]) -> list[str]:
    """The verdict with what to try, then the other findings."""
    out: list[str] = []
    if summary:
        out += ["", f"verdict     {summary}"]
        bound = next((f for f in findings if f.code in BOUND_CODES), None)
        out += [f"      try: {t}" for t in (bound.try_ if bound else [])]
    rest = [f for f in findings if f.code not in BOUND_CODES]
    if not rest:
        return out
    out += ["", "findings"]
    tried: set[str] = set()
    for f in rest:
        where = f" {shorten(f.path)}:{f.line}" if f.path and f.line else ""
        out.append(f"  {MARKS.get(f.severity, '-')} {f.code}{where}  {f.message}")
        if f.code not in tried:  # what to try, once per code
            out += [f"      try: {t}" for t in f.try_]
            tried.add(f.code)
    return out


def _ops_table(ops: list[OpRow], cuda: bool, limit: int) -> list[str]:
    """The ops, costliest first; the CUDA columns only where there was GPU work."""
    return table(
        ["name", "calls", "self CPU", "CPU total", *(["self CUDA", "CUDA total"] if cuda else [])],
        [
            [
                cut(o.name, 48),
                str(o.calls),
                fmt_us(o.self_cpu_us),
                fmt_us(o.cpu_total_us),
                *([fmt_us(o.self_cuda_us), fmt_us(o.cuda_total_us)] if cuda else []),
            ]
            for o in ops[:limit]
        ],
    )


def render_trace_analysis(result: TraceAnalysis, max_ops: int = 15) -> str:
    """`analyze` of a bare trace: device, verdict, dead window, findings, ops."""
    v = result.verdict
    cuda = v.bound != "host"
    out = [
        f"kernelscope · {shorten(result.trace.path)}  ({result.steps} call"
        f"{'s' if result.steps != 1 else ''} found by {result.calls_found_by or 'steps'}"
        + (f", {result.device}" if result.device else "")
        + ")",
    ]
    first_kernel = result.dead_window.get("entry_to_first_kernel_us")
    if first_kernel is not None:
        out += [
            "",
            f"entry → first kernel {fmt_us(first_kernel)} (from the start of the first region)",
        ]
    out += communication_lines(result.communication)
    out += _verdict(v.summary, result.findings)
    out += _roofline(result.roofline)
    steps = f"{result.steps} step{'s' if result.steps != 1 else ''}"
    out += ["", f"ops (totals over {steps})", *_ops_table(result.ops, cuda, max_ops)]
    if result.functions is not None:
        out += function_lines(result.functions, cuda, max_ops)
    if result.warnings:
        out += ["", "warnings", *("  " + w for w in result.warnings)]
    return "\n".join(out)


def function_lines(f: Functions, cuda: bool, limit: int = 15) -> list[str]:
    """Time per function from the trace's Python frames, each at its local def line where
    the project has it; the lines inside need a live run."""
    if not f.rows:
        why = (
            "the trace has no Python frames (record with with_stack=True for time per function)"
            if not f.frames_seen
            else f"none of the trace's {f.frames_seen} Python frames is the user's code"
        )
        return ["", f"functions   {why}"]
    cuda = cuda and f.gpu_us > 0
    headers = ["function", "calls", "self CPU", "CPU total"]
    headers += ["self GPU", "GPU total"] if cuda else []
    rows: list[list[str]] = []
    for r in f.rows[:limit]:
        row = [cut(r.qualname or r.name, 48), str(r.calls), fmt_us(r.self_cpu_us)]
        row.append(fmt_us(r.cpu_total_us))
        row += [fmt_us(r.self_gpu_us), fmt_us(r.gpu_total_us)] if cuda else []
        rows.append([*row, _def_where(r)])
    out = [
        "",
        "functions (totals over the trace, from its Python frames; self leaves out the "
        "functions listed that it called)",
        *table([*headers, "def"], rows, align="lrrrrrl" if cuda else "lrrrl"),
    ]
    if len(f.rows) > limit:
        out.append(f"  … {len(f.rows) - limit} more in --json")
    if cuda and f.gpu_outside_us > 0:
        out.append(
            f"  GPU work launched outside them: {fmt_us(f.gpu_outside_us)} of "
            f"{fmt_us(f.gpu_us)} (by code outside them, or on threads with no frames)"
        )
    unfound = sum(r.local_path is None and r.name != MODULE_CODE for r in f.rows)
    if unfound:
        out.append(
            f"  {unfound} recorded path{'s name' if unfound != 1 else ' names'} no file under "
            f"{shorten(f.root) or '.'} (--root sets the project)"
        )
    out.append(
        "  time per line inside a function is not in a trace: profile it live for that "
        "(kernelscope profile PATH::QUALNAME)"
    )
    return out


def _def_where(r: FunctionRow) -> str:
    """`model.py:42` in the local project; the recorded `path:line` when it is not there."""
    if r.name == MODULE_CODE:
        return f"{shorten(r.local_path or r.path)} (module level)"
    if r.local_path is None:
        return f"{r.path}:{r.line} (recorded; not found locally)"
    where = f"{shorten(r.local_path)}:{r.local_line or r.line}"
    if r.local_line is None:
        return f"{where} (no def {r.name} there now)"
    notes = [f"recorded at line {r.line}"] if r.moved else []
    notes += [f"one of {r.ties} files ending so; --root narrows it"] if r.ties > 1 else []
    return where + (f" ({'; '.join(notes)})" if notes else "")


def _roofline(rows: Sequence[OpRoof], limit: int = 8) -> list[str]:
    """The costliest ops against their own roofs; with counters, which figures are measured."""
    if not rows:
        return []
    measured = any(r.measured for r in rows)
    body = [
        [
            *(["measured" if r.measured else "model"] if measured else []),
            cut(r.name, 40),
            f"{r.share:.0%}",
            fmt_us(r.gpu_us_per_step),
            _tflops(r),
            f"{r.achieved_gbps:.0f}" if r.achieved_gbps is not None else DASH,
            r.bound,
            _achieved(r),
            cut(r.shapes, 40),
        ]
        for r in rows[:limit]
    ]
    return [
        "",
        "roofline (per step; each op against its own roof)",
        *table(
            [
                *(["figures"] if measured else []),
                *("op", "GPU", "time", "TFLOP/s", "GB/s", "bound", "achieved", "shapes"),
            ],
            body,
            align=("l" if measured else "") + "lrrrrlll",
        ),
    ]


def _tflops(r: OpRoof) -> str:
    """The row's TFLOP/s; where its FLOPs are a range, "≤" the high end's rate."""
    if r.achieved_tflops is None:
        return DASH
    return f"≤ {r.achieved_tflops:.0f}" if r.estimate == "range" else f"{r.achieved_tflops:.0f}"


def _achieved(r: OpRoof) -> str:
    """The row's share of its roof; a row of no cost model says its bytes are a guess."""
    if r.efficiency is not None:
        at_most = "≤ " if r.estimate in ("range", "grid") else ""
        return f"{at_most}{r.efficiency:.0%} of {r.roof}"
    if r.estimate == "launch":  # faster than any roof on its tensors' bytes
        return "touched part of its tensors: not rated"
    if r.estimate == "grid":  # faster than HBM on its grid's bound
        return "bytes bounded by its grid, loosely: not rated"
    return "bytes unreliable (no model)" if r.estimate == "unreliable" else DASH


def counters_lines(counters: Counters | None, kernels_per_call: float = 0.0) -> list[str]:
    """What ``--counters`` measured, how, and how long it took; or why it measured nothing.
    `kernels_per_call` (the profile's) says when the launch count cut the call short."""
    if counters is None:
        return []
    if counters.error:
        return ["", f"counters    not measured: {counters.error}"]
    n = len(counters.kernels)
    kernels = f"{n} kernel{'s' if n != 1 else ''}"
    cut = not counters.functions and n >= counters.launch_count and kernels_per_call > n
    if counters.functions:
        shown = ", ".join(counters.functions[:3]) + (", …" if len(counters.functions) > 3 else "")
        of = (
            f"{n} of one warm call's {kernels_per_call:.0f} kernels"
            if kernels_per_call > n
            else f"{kernels} of one warm call"
        )
        nf = len(counters.functions)
        what = (
            f"{of}, those of its functions matching {counters.match!r} ({shown}: {nf}, "
            "costliest first by the profile's kernel times)"
            if counters.match
            else f"{of}, those of the functions of its costliest ops ({shown}: {nf}, each op "
            "whole, by the profile's kernel times)"
        )
    elif cut:
        what = f"the first {n} of the call's {kernels_per_call:.0f} kernels (one warm call)"
    else:
        what = f"{kernels} of one warm call"
    left_out = ""
    if counters.left_out:
        named = ", ".join(f"{f} ({k} launches)" for f, k in list(counters.left_out.items())[:3])
        more = ", …" if len(counters.left_out) > 3 else ""
        left_out = f"; matched but not measured, their launches more than fit: {named}{more}"
    return [
        "",
        f"counters    Nsight Compute measured {what} in {counters.seconds:.1f} s (at most "
        f"{counters.launch_count}; cache-control {counters.cache_control}: each kernel from a "
        "cold L2, so DRAM bytes are an upper bound); rows marked measured use its bytes and "
        "FLOPs" + ("; rows of the later kernels are the model's" if cut else "") + left_out,
    ]


def _step_name(report: Report) -> str:
    """What a step is: a loop's iteration in place, else a call."""
    site = report.call_site
    return site.step if site else "call"


def _traced_note(t: Timing) -> str:
    """In place on Python before 3.12, that the tracer which found the steps slowed them."""
    return f"; {t.unprofiled_traced} (Python before 3.12)" if t.unprofiled_traced else ""


def _kept(t: Timing) -> int:
    """The calls the median and the spread are of: all timed, or those the host did not slow."""
    slowed = t.unprofiled_slowed
    return slowed.kept(t.unprofiled_reps) if slowed is not None else t.unprofiled_reps


def _counted(t: Timing) -> str:
    kept = _kept(t)
    return f"{kept} of {t.unprofiled_reps}" if kept < t.unprofiled_reps else f"{kept}"


#: Calls a timing takes at least when it runs them itself (the worker's TIMING_MIN_CALLS).
TIMED_CALLS = 20


def _few_in_place(report: Report) -> list[str]:
    """In place with --skip (or on ranks) the program's own calls 2 to --skip are timed:
    where they are fewer than a timing of its own would take, how to take more (with none,
    the figure is the cold call's). Such early calls may still be warming up: a DDP
    program's calls 2-5 read 1.70x its calls past the 50th on an H100
    (docs/h200-run/fifteenth/README.md). Where settling was judged, TIMED_CALLS were timed
    (or 5 s of them) before it."""
    site, reps = report.call_site, report.timing.unprofiled_reps
    if site is None or site.captured or reps >= TIMED_CALLS:
        return []
    if report.timing.unprofiled_settling is not None:
        return []
    one = site.step
    steps = report.steps
    need = TIMED_CALLS + 1 + steps.wait + steps.warmup + steps.active
    took = (
        f"--skip 1 times none (the cold call below is the first {one})"
        if reps <= 0
        else f"1 {one} timed (the program's {one} 2)"
        if reps == 1
        else f"{reps} {one}s timed (the program's {one}s 2-{reps + 1})"
    )
    early = "" if reps <= 0 else ", and early, while the program may still be warming up"
    return [
        f"            {took}, fewer than the {TIMED_CALLS} a captured call's timing takes"
        f"{early}: --skip {TIMED_CALLS + 1} times {TIMED_CALLS}, where the program makes at "
        f"least {need} {one}s"
    ]


def _settling(report: Report) -> list[str]:
    """In place: the timed steps left out while the program's steps settled, and whether
    those kept agreed."""
    t = report.timing
    s = t.unprofiled_settling
    if s is None:
        return []
    one = _step_name(report)
    last = s.first + t.unprofiled_reps - 1
    out: list[str] = []
    if s.left_out and s.left_out_us:
        early = f"{one}s 2-{s.first - 1}" if s.first > 3 else f"{one} 2"
        ratio = (
            f", {s.left_out_us / t.unprofiled_us_per_call:.2f}x the figure"
            if t.unprofiled_us_per_call > 0
            else ""
        )
        out.append(
            f"            {early} left out, still settling (median {fmt_us(s.left_out_us)}"
            f"{ratio}): the figure is of {one}s {s.first}-{last}"
        )
    if not s.steady:
        why = (
            f"after {s.added} more timed, at most 45 or 10 s of them"
            if s.added
            else f"{one}s this long get no more"
        )
        out.append(
            f"            still speeding up at {one} {last} ({why}): the figure may be of "
            f"{one}s still settling; --skip N times from {one} N+1"
        )
    return out


def _slowed(t: Timing, step: str = "call") -> list[str]:
    """The calls timed while the host slowed this thread's CPU, if any."""
    s = t.unprofiled_slowed
    if s is None:
        return []
    if s.throughout:
        return [
            f"            the host ran this thread's CPU {s.factor:.1f}x slower throughout the "
            f"timed {step}s (a reference loop between them at its best, against the host's "
            f"best): the figure reads high by up to that much"
        ]
    fate = (
        "left out"
        if s.left_out
        else "kept in: they ran no slower than the rest"
        if s.kept_because == "not slower"
        else "kept in: most calls ran slowed"
    )
    return [
        f"            {_slower(t)} {s.factor:.1f}x slower during {s.share:.0%} "
        f"of the timed calls (their blocks against the fast ones); those "
        f"{s.reps} took {fmt_us(s.us_per_call)} (median), {fate}"
    ]


def _slower(t: Timing) -> str:
    """Who slowed the calls: other work holding the thread's CPU, where the thread waited
    for one (its run-queue waits, KS605), else the host's CPU itself."""
    window = t.unprofiled_window_s
    span = window[1] - window[0] if len(window) == 2 else 0.0
    waited = max((u.wait_s for u in t.unprofiled_threads if u.timing), default=0.0)
    if span > 0 and waited >= CONTENDED * span:  # KS605's share of waits: contention
        return "other work held this thread's CPU (it waited for one: KS605); it ran"
    return "the host ran this thread's CPU"


def _spread(t: Timing) -> str:
    """The timing's p10–p90, from five calls on (of fewer they say nothing)."""
    if t.unprofiled_p10_us is None or t.unprofiled_p90_us is None or _kept(t) < 5:
        return ""
    return f", p10–p90 {fmt_us(t.unprofiled_p10_us)}–{fmt_us(t.unprofiled_p90_us)}"


def _unprofiled(report: Report) -> str:
    t = report.timing
    if t.unprofiled_reps <= 0:
        return f"unprofiled  none: no {_step_name(report)} timed without the profiler"
    return (
        f"unprofiled  {fmt_us(t.unprofiled_us_per_call)} per {_step_name(report)} (median of "
        + _counted(t)
        + _spread(t)
        + f", {t.unprofiled_method.replace('_', ' ')}"
        + (
            f", in a worker that never profiled; {fmt_us(t.profiling_worker_us_per_call)} in "
            "the profiling one"
            if t.unprofiled_process == "clean worker" and t.profiling_worker_us_per_call
            else ""
        )
        + ")"
        + _inflation(report)
        + _traced_note(t)
    )


def _inflation(report: Report) -> str:
    t = report.timing
    if report.device.type == "cuda" or t.unprofiled_us_per_call <= 0:
        return ""
    extra = t.cpu_us_per_step / t.unprofiled_us_per_call - 1
    if extra < -0.05:  # a profiler adds time; a "negative" overhead is the two timings' noise
        return "; the profiled and unprofiled times differ by more than the profiler can explain"
    return f"; the profiler adds {extra:+.0%} CPU time" if extra >= 0.05 else ""


def _tracer_note(report: Report) -> str:
    """How much of the traced pass's CPU time was the tracer's own, taken out."""
    cost = report.line_tracer
    if cost is None:
        return "; the tracer's own cost is left in"
    per_run = cost.in_line_us + cost.between_lines_us
    taken = sum(r.tracer_us for r in report.lines)
    return (
        f"; corrected: the tracer's own {fmt_us(per_run)} per line run taken out, "
        f"{fmt_us(taken)} per call in all"
    )


def _profiled_lines_note(report: Report) -> list[str]:
    note = profiled_lines_note(report)
    return [f"            {note}"] if note else []


def render_failure(failure: ProfileFailed, target: str) -> str:
    """A short error naming the cause and the user's file and line, and nothing of ours."""
    out = [f"kernelscope: {target}: {failure.message}"]
    if failure.path:
        where = shorten(failure.path) + (f":{failure.line}" if failure.line else "")
        code = _source_line(failure.path, failure.line)
        out.append(f"  --> {where}" + (f"\n   | {code}" if code else ""))
    if failure.hint:
        out.append(
            "  hint:\n" + "\n".join("    " + ln for ln in failure.hint.rstrip().splitlines())
        )
    if failure.memory_at_failure is not None:
        out += ["  " + ln for ln in oom_section(failure.memory_at_failure)]
    whose = "program" if failure.kind in PROGRAM_FAILURES else "function"
    for heading, text in (
        (SETUP_OUTPUT, failure.setup_output),
        (f"output of the {whose}", failure.output),
    ):
        if text.strip():
            out.append(f"  {heading} (last lines):")
            out += ["    " + cut(ln, 200) for ln in text.rstrip("\n").splitlines()[-8:]]
    return "\n".join(out)


def _source_line(path: str, line: int | None) -> str:
    if not line:
        return ""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, text in enumerate(f, 1):
                if number == line:
                    return text.rstrip()
    except OSError:
        return ""
    return ""


def _shortened(report: Report) -> str:
    """What was asked where the schedule is shorter, and why where each call is long (where
    its events made it shorter, the recording line under it says why)."""
    asked = report.steps.asked
    if not asked:
        return ""
    why = f": {report.steps.fitted}" if report.steps.fitted else ""
    return f"  (asked {' · '.join(map(str, asked))}{why})"
