# pyright: basic
"""The memory pass: one more warm call, after the timed steps and the line pass, with the
allocator's history on (CUDA: ``torch.cuda.memory._record_memory_history`` with Python
stacks) or the profiler's memory events and the line tracer (CPU), reduced here to a few
kilobytes: the snapshot never leaves the worker."""

import contextlib
import gc
import time

from .dynamo import compile_seconds
from .errors import Cancelled, JobError
from .memory_blocks import reduce_events
from .memory_sources import AutogradIndex, cpu_events, cuda_events, history_events


def memory_pass(job, fn, call, sync, device):
    """The memory pass's result for the sidecar, or None when skipped (--no-memory). The
    user's exceptions end the job as in any pass; a failure of the pass's own (a torch
    without an API it reads) is reported in the result, and the profile stands."""
    if not job.req.get("memory_pass", True):
        return None
    job.progress("memory")
    try:
        return measure(job, fn, call, sync, device)
    except (JobError, Cancelled):
        raise
    except Exception as e:
        text = ("%s: %s" % (type(e).__name__, e)).strip()[:300]
        return {"source": "failed", "peak_allocated_bytes": 0, "baseline_bytes": 0,
                "error": text}  # fmt: skip


def measure(job, fn, call, sync, device):
    """One call measured, reduced to the sidecar's shapes."""
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
        kinds_of = lambda: kind_storages(torch, objects, device)  # noqa: E731
        out, events, start = cuda_events(job, call, sync, device, hooks, kinds_of)
        kinds_before = start["kinds_before"]
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
    out["kinds_after_call"] = kind_totals(kinds_after)
    out["call_us"] = start["t1"] - start["t0"]
    out["free_bytes"], out["total_bytes"] = free_memory(torch, device, start["baseline"])
    out["objects"] = sorted({type(o).__name__ for o in objects})
    out["error"] = ""
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
                for value in state.values() if isinstance(state, dict) else ():
                    add(value, "optimizer_state")
    return out


def kind_totals(kinds):
    """Bytes by kind of a ``kind_storages`` map."""
    out = {}
    for kind, nbytes in kinds.values():
        out[kind] = out.get(kind, 0) + nbytes
    return out


def memory_at_oom(job, fn, call, sync, device):
    """The call run once more with the allocator's history on, to its out-of-memory: what
    was live at the highest point before it, by line and kind; None when it did not fail
    again or could not be measured (the job's own failure stands either way)."""
    torch = job.torch
    memory = torch.cuda.memory
    try:
        objects = live_objects(job, fn, call)
        gc.collect()
        torch.cuda.empty_cache()
        kinds = kind_storages(torch, objects, device)
        baseline = int(torch.cuda.memory_allocated(device))
        reserved = int(torch.cuda.memory_reserved(device))
        memory._record_memory_history(max_entries=200000, stacks="python")
        try:
            t0 = time.time_ns() / 1000.0
            call()
            return None  # it ran this time
        except JobError as e:
            if e.kind != "cuda_oom":
                return None
            t1 = time.time_ns() / 1000.0
            snapshot = memory._snapshot(device)
        finally:
            memory._record_memory_history(enabled=None)
        index = device.index if device.index is not None else torch.cuda.current_device()
        traces = snapshot.get("device_traces") or []
        entries = traces[index] if index < len(traces) else []
        at = [i for i, e in enumerate(entries) if e.get("action") == "oom"]
        if not at:
            return None
        oom = entries[at[-1]]
        no_trace = AutogradIndex({"traceEvents": []}, [])
        events, timed = history_events(job, entries[: at[-1]], t0, t1, no_trace)
        start = {"t0": t0, "t1": t1, "baseline": baseline, "reserved": reserved, "timed": timed}
        out = reduce_events(events, start, kinds, kinds, [])
        out.update(
            source="cuda allocator history, to the out-of-memory",
            peak_allocated_bytes=out["trace_peak_bytes"],
            approximate=["activations: not told apart at an out-of-memory (no hooks)"],
            oom_request_bytes=int(oom.get("size") or 0),
            free_bytes=int(oom.get("device_free") or 0),
            objects=sorted({type(o).__name__ for o in objects}),
        )
        for row in out["lines"]:
            row["path"] = job.local_text(row["path"])
        return out
    except Exception:  # never hide the job's own failure behind ours
        return None
    finally:
        gc.collect()
        torch.cuda.empty_cache()
