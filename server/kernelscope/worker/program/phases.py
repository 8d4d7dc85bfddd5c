# pyright: basic
"""RunProfile, phase by phase: the cold call under a light profiler, the unprofiled timing,
the warmed schedule, the trace's export, the line pass, the memory pass, and the finished
message."""

import os
import platform
import socket
import time
import warnings

from .block_masks import block_masks
from .devices import device_properties, profiler_activities
from .dynamo import compile_seconds
from .errors import JobError
from .event_budget import available_bytes, recording
from .launches import launch_report, watch_triton_launches
from .lines import attribute_lines, line_pass_calls
from .memory import memory_at_oom, memory_pass
from .memory_sources import watch_recompute
from .names import CALL_RANGE, COLD_RANGE, STAGES_PROFILED
from .optimizers import StepWatch
from .target import def_line
from .timing import TIMING_MIN_S, fitted_schedule, profiled_budget_s, unprofiled_timing, warm_up
from .traces import first_kernel_after, gzip_file, load_json


def run(job):
    """Profile the function, phase by phase, to a profile_finished result."""
    return job.with_call(lambda fn, call, device, sync: oom_told(job, fn, call, device, sync))


def oom_told(job, fn, call, device, sync):
    """The phases; a CUDA out-of-memory in any of them is run again with the allocator's
    history on, and the failure says what was live at it (JobError.memory)."""
    try:
        return profile(job, fn, call, device, sync)
    except JobError as e:
        if e.kind == "cuda_oom" and device.type == "cuda" and job.req.get("memory_pass", True):
            e.memory = memory_at_oom(job, fn, call, sync, device)
        raise


def profile(job, fn, call, device, sync):
    """The phases on a prepared call."""
    activities = profiler_activities(device)
    stem = trace_stem(job)
    cold, events = cold_call(job, call, sync, activities, stem, device)
    per_call_us = warm_up(job, call, sync)
    cold["warmup_calls"] = job.warmup_calls
    min_s = job.req.get("timing_min_s") or TIMING_MIN_S
    timing = unprofiled_timing(job, call, sync, device, per_call_us, min_s)
    steps = schedule_steps(job, timing)
    steps, shapes = fit_recording(job, events, steps)
    trace_tmp, marks = warmed_schedule(job, call, sync, activities, stem, device, steps, shapes)
    memory = peak_memory(job, device)
    trace_path, wall_us = export_schedule(job, trace_tmp, marks, steps)
    lines, tracer = line_pass(job, call, sync, activities, stem, steps, timing)
    memory_report = memory_pass(job, fn, call, sync, device)
    job.progress("done")
    done = finished(job, fn, device, steps, cold, timing, trace_path, wall_us, lines, memory)
    done["sidecar"]["line_tracer"] = tracer
    done["sidecar"]["memory_pass"] = memory_report
    return done


def trace_stem(job):
    """Create the trace folder; return the stem of this job's trace file names."""
    os.makedirs(job.trace_dir, exist_ok=True)
    return "%s-%s" % (job.req["qualname"].replace(".", "_"), job.id)


def cold_call(job, call, sync, activities, stem, device):
    """The first call under a light profiler, so its trace shows entry -> first kernel; and
    the events in that trace (one call's)."""
    from torch.profiler import profile, record_function

    job.progress("cold")
    cold_tmp = os.path.join(job.trace_dir, stem + ".cold.json")
    compiled_before = compile_seconds()
    stepped = StepWatch()
    with stepped, profile(activities=activities) as cold_prof:
        t0 = time.perf_counter()
        with record_function(COLD_RANGE), watch_recompute(job), watch_triton_launches(job):
            call()
        sync()
        first_call_us = (time.perf_counter() - t0) * 1e6
    compile_s = compile_seconds() - compiled_before
    cold_prof.export_chrome_trace(cold_tmp)
    entry_to_kernel = (
        first_kernel_after(load_json(cold_tmp), COLD_RANGE) if device.type == "cuda" else None
    )
    cold_path, events = gzip_file(cold_tmp)
    job.block_masks = block_masks()
    job.optimizer_lists = stepped.lists()
    cold = {
        "first_call_us": first_call_us,
        "entry_to_first_kernel_us": entry_to_kernel,
        "process_fresh": job.worker.jobs_run == 0,
        "trace_path": cold_path,
        "compile_us": compile_s * 1e6 if compile_s > 0 else None,
    }
    return cold, events


def requested_steps(job):
    """The (wait, warmup, active) steps the request asked for."""
    req = job.req
    return int(req["wait"]), int(req["warmup"]), int(req["active"])


def schedule_steps(job, timing):
    """The warmed schedule's (wait, warmup, active) steps: those requested, fewer where the
    calls are long (fitted_schedule; job.schedule_note then says so)."""
    per_call_us = job.ranks.agree(
        float(timing.get("us_per_call") or 0.0), "max", what="the time of a call"
    )
    steps, job.schedule_note = fitted_schedule(
        requested_steps(job), per_call_us, profiled_budget_s()
    )
    return steps


def fit_recording(job, events, steps):
    """The schedule's steps and whether it records shapes: as asked, unless their `events`
    (the cold call's) would not fit in memory (event_budget.recording; job.recording_note
    then says so)."""
    asked = bool(job.req.get("record_shapes", True))
    events = job.ranks.agree(events, "max", what="the events of a call")
    active, shapes, job.recording_note = recording(events, steps[2], available_bytes(), asked)
    return (steps[0], steps[1], active), shapes


def profiler_schedule(wait, warmup, active):
    """torch.profiler's schedule of one window, without its warning for no warm-up step
    (a long call's fitted schedule has none, and the warning would read as the program's)."""
    from torch.profiler import schedule

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Profiler won't be using warmup")
        return schedule(wait=wait, warmup=warmup, active=active, repeat=1)


def warmed_schedule(job, call, sync, activities, stem, device, steps, shapes=True):
    """Profile wait + warmup + active calls; return the trace file and the active window."""
    from torch.profiler import profile, record_function

    torch = job.torch
    req = job.req
    cuda = device.type == "cuda"
    wait, warmup, active = steps
    total = wait + warmup + active
    trace_tmp = os.path.join(job.trace_dir, stem + ".pt.trace.json")
    marks = {}
    with profile(
        activities=activities,
        schedule=profiler_schedule(wait, warmup, active),
        on_trace_ready=lambda p: p.export_chrome_trace(trace_tmp),
        record_shapes=shapes,
        with_stack=bool(req.get("with_stack", True)),
        with_flops=shapes,
    ) as prof:

        def open_active_window():
            # Drain the warmup steps' GPU work before the window opens: with the CPU
            # running ahead, their kernels would otherwise land in the active steps.
            sync()
            job.ranks.barrier()
            if cuda:
                torch.cuda.reset_peak_memory_stats(device)
            marks["active0"] = time.perf_counter()

        if wait + warmup == 0:
            open_active_window()
        for i in range(total):
            stage = STAGES_PROFILED[0 if i < wait else 1 if i < wait + warmup else 2]
            job.progress(stage, i + 1, total)
            with record_function(CALL_RANGE):
                call()
            if i == wait + warmup - 1:
                open_active_window()
            if i == total - 1:
                sync()  # the last steps' kernels must finish before the profiler collects
                marks["active1"] = time.perf_counter()
                job.ranks.barrier()
            prof.step()
    return trace_tmp, marks


def peak_memory(job, device):
    """The GPU memory peaks of the active steps (None on the CPU)."""
    if device.type != "cuda":
        return None
    torch = job.torch
    return {
        "peak_allocated_bytes": int(torch.cuda.max_memory_allocated(device)),
        "peak_reserved_bytes": int(torch.cuda.max_memory_reserved(device)),
    }


def export_schedule(job, trace_tmp, marks, steps):
    """Gzip the schedule's trace; return its path and the wall time per active step."""
    job.progress("export")
    trace_path, _events = gzip_file(trace_tmp)
    active = steps[2]
    return trace_path, (marks["active1"] - marks["active0"]) * 1e6 / max(active, 1)


def line_pass(job, call, sync, activities, stem, steps, timing):
    """Per-line attribution in a pass of its own, so the timed steps stay clean: the rows,
    and the tracer's measured cost per line run (taken out of them)."""
    if not job.req.get("line_pass", True):
        return [], None
    job.progress("lines")
    calls = job.ranks.agree(line_pass_calls(steps[2], timing), "min", what="the line pass's calls")
    return attribute_lines(job, call, sync, activities, job.trace_dir, stem, calls)


def finished(job, fn, device, steps, cold, timing, trace_path, wall_us, lines, memory):
    """The profile_finished message: the trace's path and the sidecar of what was measured."""
    torch = job.torch
    cuda = device.type == "cuda"
    wait, warmup, active = steps
    asked = requested_steps(job)
    props = device_properties(torch, device)
    return {
        "type": "profile_finished",
        "job_id": job.id,
        "trace_path": trace_path,
        "sidecar": {
            "function_line": def_line(fn),
            "device_type": device.type,
            "device_name": props.get("name", "cpu"),
            "device_index": device.index if cuda else None,
            "device_properties": props,
            "wait": wait,
            "warmup": warmup,
            "active": active,
            "asked_steps": list(asked) if tuple(steps) != asked else None,
            "schedule_note": job.schedule_note,
            "recording_note": job.recording_note,
            "cold": cold,
            "stages_s": job.stages,
            "timing": timing,
            "wall_us_per_step": wall_us,
            "lines": lines,
            "memory": memory,
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "python": platform.python_version(),
            "hostname": socket.gethostname(),
            "path": job.path,
            "qualname": job.req["qualname"],
            "call_site": job.call_site,
            "inputs_from": job.inputs_from,
            "launches": launch_report(job),
            "block_masks": job.block_masks,
            "optimizer_lists": job.optimizer_lists,
        },
    }
