# pyright: basic
"""Where the memory pass's events come from, each with the user's line: the allocator's
history (CUDA; Python stacks for the calling thread, sequence numbers for autograd's engine
thread) or the profiler's memory events (CPU). Both run the call under the line tracer and
a CPU-only profiler, whose trace ties a backward op to its forward op's line."""

import contextlib
import gc
import json
import os
import sys
import time

from .errors import JobError
from .lines import LineTracer
from .memory_blocks import enclosing

#: Allocator history entries kept (a ring buffer: older ones are dropped past it).
MAX_ENTRIES = 200000
#: What the CPU path measures differently from the CUDA one (shown as approximate).
CPU_APPROXIMATE = (
    "peak_reserved_bytes: the CPU allocator keeps no reserve; the figure is the allocated one",
    "baseline: the bytes of the parameters, gradients and optimizer state found, not the "
    "allocator's count; frees of blocks allocated before the call are not recorded by the "
    "profiler, so the peak counts gradients that zero_grad(set_to_none=True) freed",
    "device_allocs: every CPU allocation is a malloc; no allocator counters",
)
#: Entries this long (µs) before the call still count as the call's: the allocator's clock
#: is converted to the epoch apart from time.time_ns(); an earlier job's are seconds older,
#: and between the history's start and the call only the CPU profiler starts.
HISTORY_SLACK_US = 1000.0
#: The op autograd's engine runs each backward node in; its sequence number is the forward's.
BACKWARD_NODE = "autograd::engine::evaluate_function"
ENGINE = ("", 0, "autograd engine thread (no Python frames)")
OUTSIDE = ("", 0, "outside your files")
UNTIMED = (
    "lines, activations: the history's times are not on the epoch clock, so backward's "
    "allocations are not on forward lines and activations are told by address alone"
)

#: What CPython says when a C function fails without an exception set (the history's Python
#: stacks inside a backward that recomputes a checkpointed block, torch 2.11).
NULL_RESULT = "returned NULL without setting an exception"
#: torch.utils.checkpoint's non-reentrant path (torch >= 2.1), looked up at each call.
GENERATOR = "_checkpoint_without_reentrant_generator"
NO_STACKS = (
    "lines: the allocator history was recorded without Python stacks (with them this torch "
    "fails the call's backward, which recomputes a checkpointed block): each allocation is on "
    "the line running when it was made, or in backward on its forward op's line"
)


def traced_call(job, call, sync, hooks, profile_memory):
    """The call under the line tracer, the saved-tensor hooks and a CPU profiler:
    (trace, line keys, t0, t1), times in epoch µs."""
    from torch.autograd.profiler import record_function
    from torch.profiler import ProfilerActivity, profile

    tracer = LineTracer(job, record_function)
    tmp = os.path.join(job.trace_dir, "memory-%s.json" % job.id)
    os.makedirs(job.trace_dir, exist_ok=True)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=profile_memory) as prof:
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
    return trace, tracer.keys, t0, t1


class AutogradIndex:
    """A trace's line ranges and backward ops, to put an allocation at time t (epoch µs) on
    the line running then, or, inside a backward node, on the line of its forward op."""

    def __init__(self, trace, keys):
        raw = trace.get("traceEvents", [])
        # Kineto's times are µs after baseTimeNanoseconds, an epoch time like time.time_ns()
        self.base = float(trace.get("baseTimeNanoseconds", 0)) / 1000.0
        self.keys = keys
        self.lines = []
        self.backward = []  # (start, end, sequence number) of each backward node
        self.forward_ts = {}  # sequence number -> start of the forward op
        ops = {}
        for e in raw:
            name = e.get("name", "")
            if e.get("cat") == "user_annotation" and name.startswith("ks:line:"):
                self.lines.append((e["ts"], e["ts"] + e.get("dur", 0.0), int(name[8:])))
            elif e.get("cat") == "cpu_op":
                ops.setdefault(e.get("tid"), []).append(e)
        for tid_ops in ops.values():
            tid_ops.sort(key=lambda e: (e["ts"], -e.get("dur", 0.0)))
            open_backward = []  # ends of the backward nodes open on this thread
            for e in tid_ops:
                start, end = e["ts"], e["ts"] + e.get("dur", 0.0)
                while open_backward and open_backward[-1] < start:
                    open_backward.pop()
                seq = (e.get("args") or {}).get("Sequence number")
                if seq is None:
                    continue
                if e.get("name", "").startswith(BACKWARD_NODE):
                    self.backward.append((start, end, seq))
                    open_backward.append(end)
                elif not open_backward:
                    self.forward_ts.setdefault(seq, start)

    def where(self, times, backward_only=False):
        """The (path, line, via) of each epoch time in ``times`` (any order); with
        ``backward_only``, None outside backward nodes."""
        order = sorted(range(len(times)), key=lambda i: times[i])
        ts = [times[i] - self.base for i in order]
        seqs = enclosing(self.backward, ts)
        fwd = sorted({self.forward_ts[s] for s in seqs if s in self.forward_ts})
        fwd_line = dict(zip(fwd, enclosing(self.lines, fwd)))
        running = enclosing(self.lines, ts) if not backward_only else [None] * len(ts)
        out: list = [None] * len(times)
        for i, seq, idx in zip(order, seqs, running):
            if seq is not None and seq in self.forward_ts:
                line = fwd_line.get(self.forward_ts[seq])
                out[i] = OUTSIDE if line is None else (*self.keys[line], "backward")
            elif not backward_only:
                out[i] = OUTSIDE if idx is None else (*self.keys[idx], "")
        return out


def cuda_events(job, call, sync, device, hooks, kinds_of):
    """One call under the allocator's history; its events with the user's line of each.
    The history's Python stacks break a backward that recomputes a non-reentrant checkpoint
    (torch 2.11: a SystemError): where the cold call ran one (``job.recomputes``), or the
    recorded call fails so, the call is recorded with a history of no stacks, each event on
    the line running at its time (after a failure, once more unrecorded first: the failed
    call left its partial gradients behind). ``kinds_of()``: the live objects' storages by
    kind, read just before the recorded call (the start's ``kinds_before``)."""
    if not job.recomputes:
        try:
            return _cuda_events(job, call, sync, device, hooks, True, kinds_of)
        except JobError as e:
            if not (e.message.startswith("SystemError") and NULL_RESULT in e.message):
                raise
        gc.collect()
        call()
        sync()
    out, events, start = _cuda_events(job, call, sync, device, hooks, False, kinds_of)
    out["approximate"].append(NO_STACKS)
    return out, events, start


@contextlib.contextmanager
def watch_recompute(job):
    """While open, a call of torch.utils.checkpoint's non-reentrant path sets
    ``job.recomputes`` (worn by the cold call: a Python call more per checkpoint)."""
    module = sys.modules.get("torch.utils.checkpoint")
    generator = getattr(module, GENERATOR, None)
    if generator is None:
        yield
        return

    def watched(*args, **kwargs):
        job.recomputes = True
        return generator(*args, **kwargs)

    setattr(module, GENERATOR, watched)
    try:
        yield
    finally:
        setattr(module, GENERATOR, generator)


def _cuda_events(job, call, sync, device, hooks, stacks, kinds_of):
    torch = job.torch
    memory = torch.cuda.memory
    gc.collect()
    sync()
    kinds_before = kinds_of()
    baseline = int(torch.cuda.memory_allocated(device))
    reserved = int(torch.cuda.memory_reserved(device))
    before = torch.cuda.memory_stats(device)
    torch.cuda.reset_peak_memory_stats(device)
    context = "all" if stacks else None
    try:
        memory._record_memory_history(max_entries=MAX_ENTRIES, context=context, stacks="python",
                                      clear_history=True)  # fmt: skip
    except TypeError:  # torch < 2.6
        memory._record_memory_history(max_entries=MAX_ENTRIES, context=context, stacks="python")
    try:
        trace, keys, t0, t1 = traced_call(job, call, sync, hooks, False)
        snapshot = memory._snapshot(device)
    finally:
        memory._record_memory_history(enabled=None)
    after = torch.cuda.memory_stats(device)
    index = device.index if device.index is not None else torch.cuda.current_device()
    traces = snapshot.get("device_traces") or []
    entries = traces[index] if index < len(traces) else []
    events, timed = history_events(job, entries, t0, t1, AutogradIndex(trace, keys), stacks)
    out = {
        "source": "cuda allocator history",
        "approximate": [] if timed else [UNTIMED],
        "peak_allocated_bytes": int(torch.cuda.max_memory_allocated(device)),
        "peak_reserved_bytes": int(torch.cuda.max_memory_reserved(device)),
        "reserved_before_bytes": reserved,
        "device_allocs": _delta(before, after, "num_device_alloc"),
        "device_frees": _delta(before, after, "num_device_free"),
        "entries": len(events),
        "truncated": len(entries) >= MAX_ENTRIES,
    }
    start = {"t0": t0, "t1": t1, "baseline": baseline, "reserved": reserved, "timed": timed,
             "kinds_before": kinds_before}  # fmt: skip
    return out, events, start


def history_events(job, entries, t0, t1, index, stacks=True):
    """The allocator history's entries of the call as events, each on the user's line:
    the innermost frame in the user's files, or for an entry with no Python frames
    (autograd's engine thread) the line of the forward op whose backward node was running;
    without ``stacks`` (a history recorded with none), every entry by its time: that line,
    else the line running then. (events, whether the entries had times)."""
    # The history can keep an earlier job's entries (torch < 2.6 has no clear_history):
    # keep the call's, when the allocator's clock is the epoch one time.time_ns() reads
    # (else the entries keep their order, without times).
    timed = any(t0 <= (e.get("time_us") or 0) <= t1 for e in entries)
    if timed:
        entries = [e for e in entries if (e.get("time_us") or 0) >= t0 - HISTORY_SLACK_US]
    entries = [e for e in entries if e.get("action") in _CUDA_ACTIONS]
    times = [float(e.get("time_us") or t0 + n * 1e-3) for n, e in enumerate(entries)]
    engine = [i for i, e in enumerate(entries) if not e.get("frames")]
    backward = index.where([times[i] for i in engine], stacks) if timed else []
    by_sequence = dict(zip(engine, backward))
    where_of = {}
    events = []
    for n, e in enumerate(entries):
        frames = e.get("frames") or ()
        where = by_sequence.get(n) or (ENGINE if not frames else None)
        if where is None:
            key = tuple((f.get("filename"), f.get("line")) for f in frames[:64])
            where = where_of.get(key)
            if where is None:
                where = where_of[key] = user_line(job, frames)
        events.append((times[n], _CUDA_ACTIONS[e["action"]], e["addr"], int(e["size"]), where))
    events.sort(key=lambda ev: ev[0])
    return events, timed


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
    for f in frames:
        if job.is_user_file(f.get("filename") or ""):
            return (f["filename"], int(f.get("line") or 0), "")
    return OUTSIDE


def cpu_events(job, call, sync, hooks):
    """One call under the profiler's memory events: each allocation on the line running
    at the time; in backward, on the line of the forward op whose backward it is."""
    trace, keys, t0, t1 = traced_call(job, call, sync, hooks, True)
    events = cpu_trace_events(trace, keys)
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
    index = AutogradIndex(trace, keys)
    mem = []
    for e in trace.get("traceEvents", []):
        if e.get("name") == "[memory]":
            a = e.get("args") or {}
            if a.get("Device Type", 0) == 0 and a.get("Bytes"):
                mem.append(e)
    times = [index.base + e["ts"] for e in mem]
    events = []
    for t, e, where in zip(times, mem, index.where(times)):
        nbytes = int(e["args"]["Bytes"])
        action = "alloc" if nbytes > 0 else "free"
        events.append((t, action, e["args"].get("Addr"), abs(nbytes), where))
    events.sort(key=lambda ev: ev[0])
    return events
