"""Reports from a finished job, a trace with its sidecar, or a trace alone."""

from __future__ import annotations

import datetime
import time
from pathlib import Path
from typing import Any

import msgspec

from kernelscope.analysis.calls import find_calls
from kernelscope.analysis.diagnose import Analysis, analyze
from kernelscope.analysis.facts import Options
from kernelscope.analysis.functions import function_times
from kernelscope.analysis.ops import op_table
from kernelscope.analysis.trace_load import load_trace
from kernelscope.analysis.trace_model import Trace, TraceError
from kernelscope.analysis.trace_stream import Progress
from kernelscope.protocol import LineStat, ProfileFinished, Sidecar, WorkerReady
from kernelscope.report.files import companions
from kernelscope.report.schema import (
    TRACER_NOISE,
    DeadWindow,
    DeviceRef,
    FunctionRef,
    Functions,
    LineRow,
    Memory,
    Report,
    Runner,
    Steps,
    Timing,
    TraceAnalysis,
    TraceRef,
)
from kernelscope.report.sources import locate


def build_report(
    finished: ProfileFinished,
    trace: Trace,
    function_path: str,
    qualname: str,
    ready: WorkerReady | None = None,
    analysis: Analysis | None = None,
    remote: str | None = None,
) -> Report:
    """Join the worker's sidecar, the trace, and its analysis."""
    side = finished.sidecar
    active = max(side.active, 1)
    calls = find_calls(trace)
    cpu_total = calls.host_us
    ops = op_table(trace, calls=calls)
    cuda_total = (
        analysis.verdict.cuda_us_per_step * active if analysis else sum(o.self_cuda_us for o in ops)
    )
    return Report(
        function=FunctionRef(path=function_path, qualname=qualname, line=side.function_line),
        device=DeviceRef(
            side.device_type,
            side.device_name,
            side.device_index,
            threads if isinstance(threads := side.device_properties.get("threads"), int) else None,
        ),
        runner=Runner(
            remote=remote,
            host=side.hostname or (ready.hostname if ready else ""),
            python=side.python or (ready.python if ready else ""),
            torch=side.torch or (ready.torch if ready else None),
            cuda=side.cuda,
            executable=ready.executable if ready else "",
        ),
        steps=Steps(
            side.wait,
            side.warmup,
            side.active,
            side.asked_steps,
            side.recording_note,
            side.schedule_note,
        ),
        timing=Timing(
            cpu_us_per_step=cpu_total / active,
            cuda_us_per_step=cuda_total / active,
            wall_us_per_step=side.wall_us_per_step,
            unprofiled_us_per_call=side.timing.us_per_call,
            unprofiled_method=side.timing.method,
            unprofiled_reps=side.timing.reps,
            host_us_per_call=side.timing.host_us_per_call,
            unprofiled_p10_us=side.timing.p10_us,
            unprofiled_p90_us=side.timing.p90_us,
            gpu=side.timing.gpu,
            unprofiled_process=side.timing.process,
            profiling_worker_us_per_call=side.timing.profiling_worker_us_per_call,
            replayed_from=side.timing.replayed_from,
            replay_note=side.timing.replay_note,
            unprofiled_traced=side.timing.traced,
            unprofiled_window_s=side.timing.window_s,
            unprofiled_slowed=side.timing.slowed,
            unprofiled_reference_us=side.timing.reference_us,
            unprofiled_threads=side.timing.threads,
            unprofiled_children_cpu_s=side.timing.children_cpu_s,
            unprofiled_loader_us_per_call=side.timing.loader_us_per_call,
            unprofiled_loader_share=side.timing.loader_share,
            host_reference_us=side.timing.host_reference_us,
            unprofiled_settling=side.timing.settling,
            unprofiled_minor_faults_per_call=side.timing.minor_faults_per_call,
            unprofiled_user_us_per_call=side.timing.user_us_per_call,
            unprofiled_system_us_per_call=side.timing.system_us_per_call,
            unprofiled_resident_growth_per_call=side.timing.resident_growth_per_call,
            host_page_bytes=side.timing.page_bytes,
        ),
        dead_window=DeadWindow(
            first_call_us=side.cold.first_call_us,
            entry_to_first_kernel_us=analysis.entry_to_first_kernel_us
            if analysis and analysis.entry_to_first_kernel_us is not None
            else side.cold.entry_to_first_kernel_us,
            process_fresh=side.cold.process_fresh,
            cuda_init_us=ready.cuda_init_us if ready else None,
            compile_us=side.cold.compile_us,
        ),
        ops=ops,
        lines=_line_rows(side.lines),
        line_tracer=side.line_tracer,
        trace=TraceRef(finished.trace_path, side.cold.trace_path),
        memory=Memory(side.memory.peak_allocated_bytes, side.memory.peak_reserved_bytes)
        if side.memory
        else None,
        verdict=analysis.verdict if analysis else None,
        findings=analysis.findings if analysis else [],
        warnings=analysis.warnings if analysis else [],
        output=finished.output,
        output_truncated=finished.output_truncated,
        setup_output=finished.setup_output,
        setup_output_truncated=finished.setup_output_truncated,
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        roofline=analysis.roofline if analysis else [],
        stages_s=dict(side.stages_s),
        communication=analysis.communication if analysis else None,
        call_site=side.call_site,
        counters=side.counters,
        inputs_from=side.inputs_from,
        memory_pass=side.memory_pass,
    )


def analyze_trace(
    path: str | Path,
    trace: Trace,
    cold: Trace | None = None,
    options: Options | None = None,
    root: Path | None = None,
) -> TraceAnalysis:
    """Diagnose a trace from anywhere (no sidecar): FLOPs come from recorded shapes; time
    per function from its Python frames, found in the local project under ``root`` (the
    current directory by default).

    Raises TraceError when the trace has no host span and no GPU work to diagnose (only
    metadata, or only events that were skipped as bad)."""
    if not trace.ops and not trace.gpu_events:
        skipped = f" ({'; '.join(trace.warnings)})" if trace.warnings else ""
        raise TraceError(f"no host ops or GPU work to analyze{skipped}")
    analysis = analyze(trace, None, options, cold_trace=cold)
    return TraceAnalysis(
        trace=TraceRef(str(path), None),
        steps=analysis.steps,
        device=analysis.verdict.device,
        verdict=analysis.verdict,
        findings=analysis.findings,
        dead_window={"entry_to_first_kernel_us": analysis.entry_to_first_kernel_us},
        ops=op_table(trace, calls=find_calls(trace)),
        warnings=analysis.warnings,
        roofline=analysis.roofline,
        calls_found_by=analysis.calls_found_by,
        communication=analysis.communication,
        functions=_functions(trace, (root or Path.cwd()).resolve()),
    )


def _functions(trace: Trace, root: Path) -> Functions:
    times = function_times(trace)
    return Functions(
        rows=locate(times.functions, root),
        frames_seen=times.frames_seen,
        root=str(root),
        gpu_us=times.gpu_us,
        gpu_outside_us=times.gpu_outside_us,
    )


def trace_only_report(
    trace_path: str | Path, trace: Trace, function_path: str, qualname: str, def_line: int
) -> Report:
    """A report from a trace alone (no sidecar): times per step, ops, verdict, findings;
    no unprofiled timing, cold call or line attribution."""
    analysis = analyze(trace, None, function_path=function_path)
    calls = find_calls(trace)
    steps = max(len(calls), 1)
    ops = op_table(trace, calls=calls)
    cpu = calls.host_us / steps
    device = analysis.verdict.device
    return Report(
        function=FunctionRef(function_path, qualname, def_line),
        device=DeviceRef("cuda" if trace.gpu_events else "cpu", device or "unknown"),
        runner=Runner(remote=None, host="(imported trace)", python="", torch=None),
        steps=Steps(0, 0, len(trace.steps)),
        timing=Timing(
            cpu_us_per_step=cpu,
            cuda_us_per_step=analysis.verdict.cuda_us_per_step,
            wall_us_per_step=analysis.verdict.wall_us_per_step,
            unprofiled_us_per_call=0.0,
            unprofiled_method="none",
            unprofiled_reps=0,
        ),
        dead_window=DeadWindow(0.0, analysis.entry_to_first_kernel_us),
        ops=ops,
        lines=[],
        trace=TraceRef(str(trace_path), None),
        verdict=analysis.verdict,
        findings=analysis.findings,
        warnings=analysis.warnings,
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        roofline=analysis.roofline,
        communication=analysis.communication,
    )


def report_for_job(
    finished: ProfileFinished,
    function_path: str,
    qualname: str,
    ready: WorkerReady | None = None,
    remote: str | None = None,
    options: Options | None = None,
    stages_s: dict[str, float] | None = None,
    progress: Progress | None = None,
    trace: Trace | None = None,
) -> Report:
    """Read a finished job's traces, analyze them, and build the report (raises TraceError).
    ``stages_s`` are the launcher's (``JobResult.stages_s``); the report's ``stages_s`` has
    them with the worker's and the analysis's, in the order they ran. ``progress`` is told
    how much of the trace file is read; ``trace`` is the job's, read already."""
    t0 = time.perf_counter()
    if trace is None:
        trace = load_trace(finished.trace_path, progress)
    cold_path = finished.sidecar.cold.trace_path
    cold = load_trace(cold_path) if cold_path and Path(cold_path).is_file() else None
    analysis = analyze(
        trace, finished.sidecar, options, function_path=function_path, cold_trace=cold
    )
    report = build_report(finished, trace, function_path, qualname, ready, analysis, remote)
    launcher = stages_s or {}
    report.stages_s = {
        **({"worker start": launcher["worker start"]} if "worker start" in launcher else {}),
        **finished.sidecar.stages_s,
        **{k: v for k, v in launcher.items() if k != "worker start"},
        "analysis": time.perf_counter() - t0,
    }
    return report


def replay_report(
    trace_path: str | Path,
    sidecar: Sidecar,
    qualname: str,
    function_path: str,
    options: Options | None = None,
    progress: Progress | None = None,
) -> Report:
    """The report of a recorded run (a trace with its sidecar), as if it had just finished."""
    finished = ProfileFinished(job_id="replay", trace_path=str(trace_path), sidecar=sidecar)
    _, cold = companions(trace_path)
    if not function_path or not qualname:
        function_path, qualname = _recorded_function(trace_path, function_path, qualname)
    if cold is not None:
        finished.sidecar.cold.trace_path = str(cold)
    return report_for_job(finished, function_path, qualname, options=options, progress=progress)


def _recorded_function(trace_path: str | Path, path: str, qualname: str) -> tuple[str, str]:
    """Path and qualname from a `report.json` recorded beside the trace (the fixtures')."""
    recorded = Path(trace_path).with_name("report.json")
    try:
        function = msgspec.json.decode(recorded.read_bytes(), type=dict[str, Any])["function"]
        return path or str(function["path"]), qualname or str(function["qualname"])
    except (OSError, KeyError, TypeError, msgspec.DecodeError, msgspec.ValidationError):
        return path, qualname or "?"


def _line_rows(lines: list[LineStat]) -> list[LineRow]:
    """Lines sorted by cost, each with its source text."""
    texts: dict[str, list[str]] = {}
    rows: list[LineRow] = []
    for s in lines:
        if s.path not in texts:
            try:
                texts[s.path] = Path(s.path).read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                texts[s.path] = []
        source = texts[s.path]
        code = source[s.line - 1].strip() if 0 < s.line <= len(source) else ""
        noise = TRACER_NOISE * s.tracer_us
        rows.append(LineRow(**msgspec.structs.asdict(s), code=code, tracer_noise_us=noise))
    rows.sort(key=lambda r: (r.cuda_us, r.self_cpu_us), reverse=True)
    return rows
