# pyright: basic
"""The memory pass: one more warm call, after the timed steps and the line pass, with the
allocator's history on (CUDA: ``torch.cuda.memory._record_memory_history`` with Python
stacks) or the profiler's memory events and the line tracer (CPU), reduced here to a few
kilobytes: the snapshot never leaves the worker."""

import contextlib
import gc
import json
import os
import time

from .dynamo import compile_seconds
from .lines import LineTracer
from .memory_blocks import CLOCK_SLACK_US, enclosing, reduce_events

#: Allocator history entries kept (a ring buffer: older ones are dropped past it).
MAX_ENTRIES = 500000
#: What the CPU path measures differently from the CUDA one (shown as approximate).
CPU_APPROXIMATE = (
    "peak_reserved_bytes: the CPU allocator keeps no reserve; the figure is the allocated one",
    "baseline: the bytes of the parameters, gradients and optimizer state found, not the "
    "allocator's count; frees of blocks allocated before the call are not recorded by the "
    "profiler, so the peak counts gradients that zero_grad(set_to_none=True) freed",
    "device_allocs: every CPU allocation is a malloc; no allocator counters",
)


def memory_pass(job, fn, call, sync, device):
    """The memory pass's result for the sidecar, or None when skipped (--no-memory)."""
    if not job.req.get("memory_pass", True):
        return None
    job.progress("memory")
    torch = job.torch
    objects = live_objects(job, fn, call)
    gc.collect()
    kinds_before = kind_storages(torch, objects, device)
    packs = []

    def pack(t):
        with contextlib.suppress(Exception):  # tensors without storage (sparse, nested, fake)
            packs.append((t.untyped_storage().data_ptr(), time.time_ns() / 1000.0))
        return t

    compiled = compile_seconds() > 0
    if compiled:  # hooks would make compiled graphs recompile or fall back to eager
        hooks = contextlib.nullcontext()
    else:
        hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
    if device.type == "cuda":
        out, events, start = cuda_events(job, call, sync, device, hooks)
    else:
        out, events, start = cpu_events(job, call, sync, hooks)
    if compiled:
        out["approximate"].append(
            "activations: not told apart from temporaries under torch.compile (no "
            "saved-tensor hooks there)"
        )
    kinds_after = kind_storages(torch, objects, device)
    if start["baseline"] is None:  # the CPU: what the live objects hold (approximate)
        start["baseline"] = sum(nbytes for _kind, nbytes in kinds_before.values())
    out.update(reduce_events(events, start, kinds_before, kinds_after, packs))
    out["call_us"] = start["t1"] - start["t0"]
    out["free_bytes"], out["total_bytes"] = free_memory(torch, device, start["baseline"])
    out["objects"] = sorted({type(o).__name__ for o in objects})
    for row in out["lines"]:
        row["path"] = job.local_text(row["path"])
    if out.get("peak_allocated_bytes") is None:
        out["peak_allocated_bytes"] = out["trace_peak_bytes"]
    return out


def free_memory(torch, device, held):
    """(room, total) bytes: what a fresh process like this one could take for the call.
    On a GPU, ``mem_get_info``'s free plus this process's own reserve; on the CPU,
    MemAvailable plus ``held`` (the bytes the call's objects hold, approximate)."""
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        return int(free + torch.cuda.memory_reserved(device)), int(total)
    try:
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f if ":" in line)
        total = int(info["MemTotal"].split()[0]) * 1024
        return int(info["MemAvailable"].split()[0]) * 1024 + held, total
    except (OSError, KeyError, ValueError):
        return None, None


def cuda_events(job, call, sync, device, hooks):
    """One call under the allocator's history; its events with the user's line of each."""
    torch = job.torch
    memory = torch.cuda.memory
    sync()
    baseline = int(torch.cuda.memory_allocated(device))
    reserved = int(torch.cuda.memory_reserved(device))
    before = torch.cuda.memory_stats(device)
    torch.cuda.reset_peak_memory_stats(device)
    memory._record_memory_history(max_entries=MAX_ENTRIES, stacks="python")
    try:
        t0 = time.time_ns() / 1000.0
        with hooks:
            call()
        sync()
        t1 = time.time_ns() / 1000.0
        snapshot = memory._snapshot(device)
    finally:
        memory._record_memory_history(enabled=None)
    after = torch.cuda.memory_stats(device)
    index = device.index if device.index is not None else torch.cuda.current_device()
    traces = snapshot.get("device_traces") or []
    entries = traces[index] if index < len(traces) else []
    # The history can keep an earlier job's entries (torch < 2.6 has no clear_history):
    # keep the call's, when the allocator's clock is the epoch one time.time_ns() reads.
    if any((e.get("time_us") or 0) >= t0 for e in entries):
        entries = [e for e in entries if (e.get("time_us") or 0) >= t0 - CLOCK_SLACK_US]
    events = []
    where_of = {}
    for n, e in enumerate(entries):
        action = _CUDA_ACTIONS.get(e.get("action"))
        if action is None:
            continue
        frames = e.get("frames") or ()
        key = tuple((f.get("filename"), f.get("line")) for f in frames[:64])
        where = where_of.get(key)
        if where is None:
            where = where_of[key] = user_line(job, frames)
        t = e.get("time_us")
        events.append((float(t) if t is not None else t0 + n * 1e-3, action, e["addr"],
                       int(e["size"]), where))  # fmt: skip
    events.sort(key=lambda ev: ev[0])
    out = {
        "source": "cuda allocator history",
        "approximate": [],
        "peak_allocated_bytes": int(torch.cuda.max_memory_allocated(device)),
        "peak_reserved_bytes": int(torch.cuda.max_memory_reserved(device)),
        "reserved_before_bytes": reserved,
        "device_allocs": _delta(before, after, "num_device_alloc"),
        "device_frees": _delta(before, after, "num_device_free"),
        "entries": len(entries),
        "truncated": len(entries) >= MAX_ENTRIES,
    }
    start = {"t0": t0, "t1": t1, "baseline": baseline, "reserved": reserved}
    return out, events, start


# free_requested: the block left the user (memory_allocated drops); free_completed follows
# once its stream events finished, for the same block.
_CUDA_ACTIONS = {
    "alloc": "alloc",
    "free_requested": "free",
    "segment_alloc": "seg_alloc",
    "segment_free": "seg_free",
    "segment_map": "seg_alloc",
    "segment_unmap": "seg_free",
}


def _delta(before, after, key):
    if key not in before or key not in after:
        return None
    return int(after[key]) - int(before[key])


def user_line(job, frames):
    """The innermost frame in the user's files, past torch's and libraries' frames."""
    if not frames:
        return ("", 0, "autograd engine thread (no Python frames)")
    for f in frames:
        if job.is_user_file(f.get("filename") or ""):
            return (f["filename"], int(f.get("line") or 0), "")
    return ("", 0, "outside your files")


def cpu_events(job, call, sync, hooks):
    """One call under the profiler's memory events and the line tracer: each allocation
    on the line running at the time; in backward, on the line of the forward op whose
    backward it is (the ops' sequence numbers)."""
    from torch.autograd.profiler import record_function
    from torch.profiler import ProfilerActivity, profile

    tracer = LineTracer(job, record_function)
    tmp = os.path.join(job.trace_dir, "memory-%s.json" % job.id)
    os.makedirs(job.trace_dir, exist_ok=True)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        t0 = time.time_ns() / 1000.0
        with hooks, tracer:
            call()
        sync()
        t1 = time.time_ns() / 1000.0
    prof.export_chrome_trace(tmp)
    try:
        with open(tmp, "rb") as f:
            trace = json.load(f)
    finally:
        os.unlink(tmp)
    events = cpu_trace_events(trace, tracer.keys)
    out = {
        "source": "profiler memory events (CPU)",
        "approximate": list(CPU_APPROXIMATE),
        "peak_allocated_bytes": None,
        "peak_reserved_bytes": None,
        "reserved_before_bytes": None,
        "device_allocs": None,
        "device_frees": None,
        "entries": len(events),
        "truncated": False,
    }
    return out, events, {"t0": t0, "t1": t1, "baseline": None, "reserved": None}


def cpu_trace_events(trace, keys):
    """The CPU allocator's events of a profiler trace, each with its line."""
    raw = trace.get("traceEvents", [])
    # Kineto's times are µs after baseTimeNanoseconds, an epoch time like time.time_ns()
    base = float(trace.get("baseTimeNanoseconds", 0)) / 1000.0
    mem, lines, ops = [], [], {}
    for e in raw:
        name = e.get("name", "")
        if name == "[memory]":
            a = e.get("args") or {}
            if a.get("Device Type", 0) == 0 and a.get("Bytes"):
                mem.append(e)
        elif e.get("cat") == "user_annotation" and name.startswith("ks:line:"):
            lines.append((e["ts"], e["ts"] + e.get("dur", 0.0), int(name[8:])))
        elif e.get("cat") == "cpu_op":
            ops.setdefault(e.get("tid"), []).append(e)
    mem.sort(key=lambda e: e["ts"])
    backward_seq, forward_ts = backward_sequences(ops, mem)
    fwd_times = sorted(set(forward_ts.values()))
    fwd_line = dict(zip(fwd_times, enclosing(lines, fwd_times)))
    at_line = enclosing(lines, [e["ts"] for e in mem])
    events = []
    for e, running, seq in zip(mem, at_line, backward_seq):
        a = e["args"]
        idx, via = running, ""
        if seq is not None and seq in forward_ts:
            idx, via = fwd_line.get(forward_ts[seq]), "backward"
        where = ("", 0, "outside your files") if idx is None else (*keys[idx], via)
        nbytes = int(a["Bytes"])
        action = "alloc" if nbytes > 0 else "free"
        events.append((base + e["ts"], action, a.get("Addr"), abs(nbytes), where))
    return events


#: The op autograd's engine runs each backward node in; its sequence number is the forward's.
_BACKWARD_NODE = "autograd::engine::evaluate_function"


def backward_sequences(ops, mem):
    """For each memory event (sorted), the sequence number of the backward op it happened
    in (None outside backward); and each forward op's start by its sequence number."""
    spans = {}  # tid -> [(start, end, sequence number of the backward op it is in)]
    forward_ts = {}
    for tid, tid_ops in ops.items():
        tid_ops.sort(key=lambda e: (e["ts"], -e.get("dur", 0.0)))
        stack = []
        for e in tid_ops:
            a = e.get("args") or {}
            start, end = e["ts"], e["ts"] + e.get("dur", 0.0)
            while stack and stack[-1][1] < start:
                stack.pop()
            seq = a.get("Sequence number")
            if e.get("name", "").startswith(_BACKWARD_NODE) and seq is not None:
                mine = seq
            else:
                mine = stack[-1][2] if stack else None
                if seq is not None and mine is None:
                    forward_ts.setdefault(seq, start)
            stack.append((start, end, mine))
            spans.setdefault(tid, []).append((start, end, mine))
    by_tid = {}
    for e in mem:
        by_tid.setdefault(e.get("tid"), []).append(e)
    found = {}
    for tid, events in by_tid.items():
        for e, seq in zip(events, enclosing(spans.get(tid, []), [e["ts"] for e in events])):
            found[id(e)] = seq
    return [found.get(id(e)) for e in mem], forward_ts


def live_objects(job, fn, call):
    """The modules and optimizers the call can reach: its inputs, the bound object, the
    globals and closure cells the function names, one level into containers and objects."""
    torch = job.torch
    module_t, optim_t = torch.nn.Module, torch.optim.Optimizer
    roots = []
    if job.loaded is not None:
        _module, owner, args, kwargs = job.loaded
        roots += [owner, *args, *kwargs.values()]
    roots.append(getattr(fn, "__self__", None))
    code = getattr(fn, "__code__", None)
    names = getattr(code, "co_names", ())
    glob = getattr(fn, "__globals__", {}) or {}
    roots += [glob.get(n) for n in names]
    for f in (fn, call):
        for cell in getattr(f, "__closure__", None) or ():
            with contextlib.suppress(ValueError):  # an empty cell
                roots.append(cell.cell_contents)
    found = {}
    for obj in _one_level(roots):
        if isinstance(obj, (module_t, optim_t)):
            found[id(obj)] = obj
    return list(found.values())


def _one_level(roots):
    for obj in roots:
        if obj is None:
            continue
        yield obj
        if isinstance(obj, (list, tuple)):
            yield from obj
        elif isinstance(obj, dict):
            yield from obj.values()
        else:
            yield from (getattr(obj, "__dict__", None) or {}).values()


def kind_storages(torch, objects, device):
    """Storage address -> (kind, bytes) of the parameters (and buffers), gradients and
    optimizer state of ``objects`` on ``device``; the first kind found wins."""
    out = {}

    def add(t, kind):
        if not isinstance(t, torch.Tensor) or t.device.type != device.type:
            return
        try:
            storage = t.untyped_storage()
        except Exception:
            return
        ptr = storage.data_ptr()
        if ptr and ptr not in out:
            out[ptr] = (kind, int(storage.nbytes()))

    params = []
    for obj in objects:
        if isinstance(obj, torch.nn.Module):
            params += list(obj.parameters())
            for b in obj.buffers():
                add(b, "parameters")
        else:
            for group in obj.param_groups:
                params += list(group["params"])
    for p in params:
        add(p, "parameters")
    for p in params:
        add(p.grad, "gradients")
    for obj in objects:
        if isinstance(obj, torch.optim.Optimizer):
            for state in obj.state.values():
                for value in state.values():
                    add(value, "optimizer_state")
    return out
