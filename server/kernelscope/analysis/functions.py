"""Time per function of the user's code, from a trace's ``python_function`` frames
(``with_stack=True``): self and total CPU time, and the GPU time of the work launched under
each. Frames name a function by its file and first line, never the line running inside it."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec

from kernelscope.analysis.trace_model import Event, Op, Thread, Trace
from kernelscope.analysis.user_code import user_function

_SEQUENCE = re.compile(rb'"Sequence number": ?(-?\d+)')
_FWD_THREAD = re.compile(rb'"Fwd thread id": ?(\d+)')
_HALF_NS_US = 0.0005  # Kineto writes µs with 3 decimals: times this close are equal

#: The name of a frame of module-level code (a script's body), which has no def line.
MODULE_CODE = "<module>"

Key = tuple[str, int, str]
"""(path as recorded, first line, function name)."""


class FunctionTime(msgspec.Struct):
    """One function of the user's code over the whole trace. ``path`` is as recorded (the
    machine that recorded it may have had the project elsewhere); ``line`` is the function's
    first line (its first decorator's when it has any). Self times leave out the time in the
    other user functions it called, not the library code it called."""

    path: str
    line: int
    name: str
    calls: int
    self_cpu_us: float
    cpu_total_us: float
    self_gpu_us: float = 0.0
    """GPU work launched in the function itself (and the library code it called)."""
    gpu_total_us: float = 0.0
    """GPU work launched anywhere under it."""


class FunctionTimes(msgspec.Struct):
    """The user's functions, costliest first (GPU total, then CPU total)."""

    functions: list[FunctionTime]
    frames_seen: int
    """The trace's ``python_function`` frames, the user's and the others (0: no stacks)."""
    gpu_us: float = 0.0
    """All GPU work launched in the trace."""
    gpu_outside_us: float = 0.0
    """GPU work launched outside every user function: code outside them, or a launch with
    no recorded frame. A backward op's work counts under the functions around the
    ``backward()`` call that waited for it (its forward op's thread, at that time)."""


@dataclass
class _Thread:
    """One thread's frames sorted by start, each with its parent's position (-1: none)."""

    starts: list[float] = field(default_factory=list[float])
    ends: list[float] = field(default_factory=list[float])
    parents: list[int] = field(default_factory=list[int])
    keys: list[Key] = field(default_factory=list[Key])


def function_times(trace: Trace) -> FunctionTimes:
    """Each user function's calls, self and total CPU time, and the GPU time of the work
    launched under it (a kernel counts once in the total of each function around its launch,
    and in the self time of the innermost; a backward op's, around the ``backward()`` that
    ran it). A recursive call's time counts once."""
    sums: dict[Key, FunctionTime] = {}
    threads = _nest(trace.python_functions, sums)
    forward: _Forward | None = None
    gpu = outside = 0.0
    for g in trace.gpu_events:
        if g.launch < 0:
            continue
        gpu += g.dur
        launch = trace.ops[g.launch]
        chain = _around(threads.get((launch.pid, launch.tid)), launch.ts, launch.end)
        if not chain and threads:  # a backward op's launch: under the frames that wait on it
            forward = _forward_threads(trace) if forward is None else forward
            thread = _backward_of(trace, launch, forward)
            chain = _around(threads.get(thread), launch.ts, launch.end) if thread else []
        if not chain:
            outside += g.dur
            continue
        sums[chain[0]].self_gpu_us += g.dur
        for key in dict.fromkeys(chain):
            sums[key].gpu_total_us += g.dur
    rows = list(sums.values())
    rows.sort(key=lambda r: (r.gpu_total_us, r.cpu_total_us), reverse=True)
    return FunctionTimes(rows, trace.frames_seen, gpu, outside)


class _Forward(msgspec.Struct):
    """Where forward ops ran: by autograd sequence number, and for each thread that ran
    backward ops, the thread of their forward ops."""

    by_sequence: dict[int, Thread]
    by_backward_thread: dict[Thread, Thread]


def _forward_threads(trace: Trace) -> _Forward:
    by_sequence: dict[int, Thread] = {}
    backward: list[tuple[int, Thread]] = []
    for op in trace.cpu_ops:
        seq, fwd = _autograd_ids(op)
        if seq is not None and not fwd:
            by_sequence.setdefault(seq, (op.pid, op.tid))
        elif seq is not None:
            backward.append((seq, (op.pid, op.tid)))
    by_thread = {t: by_sequence[seq] for seq, t in backward if seq in by_sequence}
    return _Forward(by_sequence, by_thread)


def _autograd_ids(op: Op) -> tuple[int | None, int]:
    """An op's autograd sequence number (None: it has none) and its ``Fwd thread id``: 0 on
    a forward op, the forward's thread (torch's number, not the OS's) on a backward op."""
    if b'"Sequence number"' not in op.args:
        return None, 0
    seq, fwd = _SEQUENCE.search(op.args), _FWD_THREAD.search(op.args)
    return (int(seq[1]) if seq else None), (int(fwd[1]) if fwd else 0)


def _backward_of(trace: Trace, launch: Op, forward: _Forward) -> Thread | None:
    """The thread that ran the forward op of the backward op around ``launch`` (autograd
    runs backward on threads of its own while the caller waits in ``backward()``); for an
    op with no forward op (AccumulateGrad), the forward thread of its thread's other ops."""
    i = launch.parent
    while i >= 0:
        op = trace.ops[i]
        seq, fwd = _autograd_ids(op)
        if seq is not None and fwd and seq in forward.by_sequence:
            return forward.by_sequence[seq]
        i = op.parent
    return forward.by_backward_thread.get((launch.pid, launch.tid))


def _nest(frames: Sequence[Event], sums: dict[Key, FunctionTime]) -> dict[Thread, _Thread]:
    """Nest each thread's user frames and add their CPU times to ``sums``."""
    by_thread: defaultdict[Thread, list[tuple[Event, Key]]] = defaultdict(list)
    for frame in frames:
        key = user_function(frame.name)
        if key is not None:
            by_thread[frame.pid, frame.tid].append((frame, key))
    return {thread: _nest_thread(found, sums) for thread, found in by_thread.items()}


def _nest_thread(found: list[tuple[Event, Key]], sums: dict[Key, FunctionTime]) -> _Thread:
    found.sort(key=lambda fk: (fk[0].ts, -fk[0].dur))
    t = _Thread()
    stack: list[int] = []
    inner = [0.0] * len(found)  # time in each frame's user callees
    open_keys: Counter[Key] = Counter()

    def close(i: int) -> None:
        frame, key = found[i]
        open_keys[key] -= 1
        s = sums.get(key) or sums.setdefault(key, FunctionTime(*key, 0, 0.0, 0.0))
        s.calls += 1
        s.self_cpu_us += frame.dur - inner[i]
        if not open_keys[key]:  # not inside a call of itself
            s.cpu_total_us += frame.dur

    for i, (frame, key) in enumerate(found):
        while stack and frame.ts >= t.ends[stack[-1]] - _HALF_NS_US:
            close(stack.pop())
        parent = stack[-1] if stack else -1
        if parent >= 0:
            inner[parent] += frame.dur
        t.starts.append(frame.ts)
        t.ends.append(frame.ts + frame.dur)
        t.parents.append(parent)
        t.keys.append(key)
        stack.append(i)
        open_keys[key] += 1
    while stack:
        close(stack.pop())
    return t


def _around(thread: _Thread | None, start: float, end: float) -> list[Key]:
    """The functions whose frames hold [start, end] on the thread, innermost first. Frames
    nest, so every frame that holds it is an ancestor of the last one to start before it."""
    if thread is None:
        return []
    i = bisect_right(thread.starts, start + _HALF_NS_US) - 1
    while i >= 0 and thread.ends[i] + _HALF_NS_US < end:
        i = thread.parents[i]
    chain: list[Key] = []
    while i >= 0:
        chain.append(thread.keys[i])
        i = thread.parents[i]
    return chain
