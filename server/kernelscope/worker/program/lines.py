# pyright: basic
"""The line pass: the call run under ``sys.settrace`` restricted to the user's files, a
``record_function`` range per executed line, and each line's self/total CPU and CUDA time,
top ops and syncs read back from that pass's trace."""

import gc
import os
import sys
import time

from .names import GPU_CATS, SYNC_CALLS, SYNC_OPS
from .traces import load_json

#: A call this long (µs) gets one call of the line pass: that one call has every line.
LONG_CALL_US = 5000.0
#: Iterations of the calibration's comprehension and loop, run under the tracer before
#: and after the calls (three line runs each).
CALIBRATION_LOOPS = 500


def _calibration_loop(n):
    """Pure-Python lines whose untraced cost is known, at the top of the traced stack: each
    line run's range holds the tracer's in-line cost, the gaps its cost between lines."""
    x = 0
    for i in range(n):
        x = i
    return x


def _calibration_comprehension(n):
    """A comprehension (a frame of its own before Python 3.12), as in a Dataset's items."""
    return [i + 0 for i in range(n)]


def line_pass_calls(active, timing):
    """Calls in the line pass: up to 3 of the active steps, 1 when a call is long."""
    if (timing.get("us_per_call") or 0.0) >= LONG_CALL_US:
        return 1
    return max(1, min(active, 3))


def attribute_lines(job, call, sync, activities, trace_dir, stem, calls):
    """Run `calls` calls under the line tracer; per-line statistics, per call."""
    from torch.autograd.profiler import record_function
    from torch.profiler import ProfilerActivity, profile

    cuda = ProfilerActivity.CUDA in activities
    # this module's code runs under the tracer only in the calibration functions
    here = _calibration_loop.__code__.co_filename
    tracer = LineTracer(job, record_function, also=here)

    def calibrate():
        t = time.perf_counter()
        _calibration_loop(CALIBRATION_LOOPS)
        _calibration_comprehension(CALIBRATION_LOOPS)
        return (time.perf_counter() - t) * 1e6

    tmp = os.path.join(trace_dir, stem + ".lines.json")
    plain_us = calibrate() + calibrate()
    # No collection inside the pass: a replayed call is the same every time, so a collection
    # lands on the same line each pass, and its pause (33 ms in a 15 ms call, on an eval-mode
    # dropout in karpathy/ng-video-lecture's gpt.py) read as that line's own cost.
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        with profile(activities=activities) as prof:
            sync()
            with tracer:
                traced_us = calibrate()  # before the calls and after: the pass's drift averaged
                for _ in range(calls):
                    call()
                traced_us += calibrate()
            sync()
    finally:
        if collecting:
            gc.enable()
    prof.export_chrome_trace(tmp)
    try:
        events = load_json(tmp)
    finally:
        os.unlink(tmp)
    keys = tracer.keys
    cal = [i for i, (path, _line) in enumerate(keys) if path == here]
    split = _calibration_comprehension.__code__.co_firstlineno
    loop = [i for i in cal if keys[i][1] < split]
    # the calibration's ranges alone first (they nest in nothing), then all with its cost
    names = {"ks:line:%d" % i for i in cal}
    own = [e for e in events if e.get("name") in names and e.get("cat") == "user_annotation"]
    cost = tracer_cost(tally_lines(own, len(keys), cuda), cal, loop, plain_us, traced_us)
    tally = tally_lines(events, len(keys), cuda, cost)
    return line_rows(tally, keys, calls, set(cal)), cost


class LineTracer:
    """While active, a ``record_function`` range named ``ks:line:N`` around each executed
    line of the user's files (and of the file `also`, the calibration's); ``keys[N]`` is its
    (path, line)."""

    def __init__(self, job, record_function, also=None):
        self.job = job
        self.record_function = record_function
        self.also = also
        self.keys = []
        self.key_index = {}
        self.open_ranges = {}

    def enter(self, frame):
        key = (frame.f_code.co_filename, frame.f_lineno)
        idx = self.key_index.get(key)
        if idx is None:
            idx = self.key_index[key] = len(self.keys)
            self.keys.append(key)
        rf = self.record_function("ks:line:%d" % idx)
        rf.__enter__()
        self.open_ranges[frame] = rf

    def local(self, frame, event, arg):
        if event == "line":
            rf = self.open_ranges.pop(frame, None)
            if rf is not None:
                rf.__exit__(None, None, None)
            self.enter(frame)
        elif event == "return":
            rf = self.open_ranges.pop(frame, None)
            if rf is not None:
                rf.__exit__(None, None, None)
        return self.local

    def tracer(self, frame, event, arg):
        name = frame.f_code.co_filename
        if event == "call" and (name == self.also or self.job.is_user_file(name)):
            return self.local
        return None

    def __enter__(self):
        sys.settrace(self.tracer)
        return self

    def __exit__(self, *exc):
        sys.settrace(None)
        for rf in self.open_ranges.values():
            rf.__exit__(None, None, None)
        self.open_ranges.clear()


def tracer_cost(tally, cal, loop, plain_us, traced_us):
    """The tracer's cost per line run, from the calibration: ``in_line_us`` falls inside a
    line's range (its self time; read on the loop's lines, whose gaps are in no range),
    ``between_lines_us`` between two ranges (a calling line's self time): the rest of the
    calibration's traced time over its untraced time. Measured over ``hits`` line runs;
    None if nothing was."""
    hits = sum(tally.hits[i] for i in cal)
    # the loop's body and header, run n times each: its first and last lines run once a
    # call, and the first range of a pass carries one-off costs (~0.25 ms), no line's own
    most = max((tally.hits[i] for i in loop), default=0)
    hot = [i for i in loop if tally.hits[i] * 2 > most]
    loop_hits = sum(tally.hits[i] for i in hot)
    if hits <= 0 or loop_hits <= 0:
        return None
    # the loop's own work, untraced, is about half of the calibration's (n runs each)
    inside = sum(tally.self_cpu[i] for i in hot) - plain_us / 2
    in_line = max(0.0, inside / loop_hits)
    once = [i for i in loop if i not in hot]
    one_off = sum(max(0.0, tally.self_cpu[i] - in_line * tally.hits[i]) for i in once)
    total = max(0.0, (traced_us - plain_us - one_off) / hits)
    return {"in_line_us": in_line, "between_lines_us": max(0.0, total - in_line), "hits": hits}


class LineTally:
    """Per-line sums over the line pass; ranges are closed innermost first. With a tracer
    `cost`, each range's self time loses the tracer's in-line cost and its between-lines
    cost per range directly inside it, and its total is its corrected self time plus its
    inner ranges' corrected totals (``tracer`` keeps what was taken out of the self time).
    Both are signed sums, as the cost is a mean: ``line_rows`` stops them at zero per line."""

    def __init__(self, n, cost=None):
        self.self_cpu = [0.0] * n
        self.total_cpu = [0.0] * n
        self.tracer = [0.0] * n
        self.cuda_self = [0.0] * n
        self.cuda_total = [0.0] * n
        self.hits = [0] * n
        self.syncs = [0] * n
        self.sync_wait = [0.0] * n
        self.op_time = [{} for _ in range(n)]
        self.in_line = cost["in_line_us"] if cost else 0.0
        self.between = cost["between_lines_us"] if cost else 0.0

    def close(self, node, stack):
        """Book one finished range; recursion into the same line counts its total once.
        A node: [line index, end, inner ranges' time, own CUDA, callees' CUDA, dur, inner
        ranges, inner ranges' corrected totals]."""
        idx, _end, child, csf, csub, dur = node[:6]
        inner, inner_total = node[6:8] if len(node) > 6 else (0, child)
        raw = dur - child
        # signed: a run cheaper than the mean cost is noise both ways, and stopping each
        # at zero would keep only the runs above it (line_rows stops the sum at zero)
        own = raw - self.in_line - self.between * inner
        total = own + inner_total
        self.self_cpu[idx] += own
        self.tracer[idx] += raw - own
        self.cuda_self[idx] += csf
        if not any(s[0] == idx for s in stack):
            self.total_cpu[idx] += total
            self.cuda_total[idx] += csf + csub
        if stack:
            stack[-1][4] += csf + csub
            if len(stack[-1]) > 6:
                stack[-1][7] += total


def line_stats(events, keys, calls, cuda):
    """Per-line self/total CPU and CUDA time from the line pass's annotations (the
    tracer's cost left in)."""
    return line_rows(tally_lines(events, len(keys), cuda), keys, calls, set())


def tally_lines(events, n, cuda, cost=None):
    """The line ranges of the pass's trace tallied per line index (the tracer's `cost`
    taken out, see LineTally).

    Work on a thread with no line ranges (autograd's engine runs ``backward()`` there, and
    torch.compile and user threads launch from others) belongs to the line that was
    running on the traced thread at the time: ``loss.backward()`` gets the backward."""
    gpu_by_corr = {}
    for e in events:
        if e.get("cat") in GPU_CATS:
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                gpu_by_corr[corr] = gpu_by_corr.get(corr, 0.0) + float(e.get("dur", 0.0))
    per_tid = {}
    line_tids = set()
    for e in events:
        cat = e.get("cat")
        name = e.get("name", "")
        if cat == "user_annotation" and name.startswith("ks:line:"):
            per_tid.setdefault(e.get("tid"), []).append((e["ts"], 0, -e["dur"], int(name[8:]), e))
            line_tids.add(e.get("tid"))
        elif cat in ("cuda_runtime", "cuda_driver", "cpu_op"):
            per_tid.setdefault(e.get("tid"), []).append((e["ts"], 1, 0.0, -1, e))
    tally = LineTally(n, cost)
    extra_cuda = attribute_other_threads(tally, per_tid, line_tids, gpu_by_corr, cuda)
    for tid in line_tids:
        items = per_tid[tid]
        items.sort(key=lambda t: (t[0], t[1], t[2]))
        stack = []  # open ranges (see LineTally.close)
        for ts, kind, neg_dur, idx, e in items:
            while stack and ts >= stack[-1][1]:
                tally.close(stack.pop(), stack)
            if kind == 0:
                dur = -neg_dur
                if stack:
                    stack[-1][2] += dur
                    stack[-1][6] += 1
                tally.hits[idx] += 1
                own = extra_cuda.get(id(e), 0.0)
                stack.append([idx, ts + dur, 0.0, own, 0.0, dur, 0, 0.0])
            elif stack:
                attribute_event(tally, stack[-1], e, gpu_by_corr, cuda)
        while stack:
            tally.close(stack.pop(), stack)
    return tally


def line_rows(tally, keys, calls, skip):
    """Each executed line's costs per call (``tracer_us``: the tracer's cost taken out of
    its self time), but the lines in `skip`."""
    out = []
    for idx, (path, line) in enumerate(keys):
        if not tally.hits[idx] or idx in skip:
            continue
        ops = sorted(tally.op_time[idx].items(), key=lambda kv: -kv[1])[:3]
        own = max(0.0, tally.self_cpu[idx])
        raw = tally.self_cpu[idx] + tally.tracer[idx]
        out.append(
            {
                "path": path,
                "line": line,
                "self_cpu_us": own / calls,
                "cpu_total_us": max(own, tally.total_cpu[idx]) / calls,
                "tracer_us": (raw - own) / calls,
                "cuda_us": tally.cuda_self[idx] / calls,
                "cuda_total_us": tally.cuda_total[idx] / calls,
                "hits": tally.hits[idx] / calls,
                "syncs": round(tally.syncs[idx] / float(calls)),
                "sync_wait_us": tally.sync_wait[idx] / calls,
                "top_ops": [name for name, _ in ops],
            }
        )
    return out


def attribute_other_threads(tally, per_tid, line_tids, gpu_by_corr, cuda):
    """Charge the ops and launches of threads without line ranges to the innermost line
    range open at their start on a traced thread; returns the CUDA time each range (by the
    id of its event) gets that way."""
    ranges = sorted(
        (item for tid in line_tids for item in per_tid[tid] if item[1] == 0),
        key=lambda t: (t[0], t[2]),
    )
    others = sorted(
        (item for tid, items in per_tid.items() if tid not in line_tids for item in items),
        key=lambda t: t[0],
    )
    extra = {}
    stack = []  # open ranges: (end, line index, event)
    k = 0
    for ts, _kind, _neg, _idx, e in others:
        while k < len(ranges) and ranges[k][0] <= ts:
            r = ranges[k]
            while stack and stack[-1][0] < r[0]:
                stack.pop()
            stack.append((r[0] - r[2], r[3], r[4]))
            k += 1
        while stack and stack[-1][0] < ts:
            stack.pop()
        if not stack:
            continue
        _end, idx, owner = stack[-1]
        node = [idx, 0.0, 0.0, 0.0, 0.0, 0.0]
        attribute_event(tally, node, e, gpu_by_corr, cuda)
        if node[3]:
            extra[id(owner)] = extra.get(id(owner), 0.0) + node[3]
    return extra


def attribute_event(tally, top, e, gpu_by_corr, cuda):
    """Charge an op or a runtime call to the innermost open line range."""
    idx = top[0]
    name = e.get("name", "")
    if e.get("cat") == "cpu_op":
        tally.op_time[idx][name] = tally.op_time[idx].get(name, 0.0) + float(e.get("dur", 0.0))
        if name in SYNC_OPS and not cuda:
            tally.syncs[idx] += 1  # on a GPU the runtime's synchronize calls count instead
        return
    top[3] += gpu_by_corr.get((e.get("args") or {}).get("correlation"), 0.0)
    if any(key in name for key in SYNC_CALLS) and "Async" not in name:
        tally.syncs[idx] += 1
        tally.sync_wait[idx] += float(e.get("dur", 0.0))
