"""Kineto Chrome traces (torch.profiler ``export_chrome_trace``) as a linked model.

A ``Trace`` holds the host spans (``Op``: aten ops, ``record_function`` ranges, runtime and
driver calls) nested per thread, the GPU work (``GpuEvent``) linked to its launch and to the
op that made it, the user's ``python_function`` frames and the steps. Of the args, only what
linking needs is decoded; the rest (``Input Dims`` ...) is kept as bytes for aten ops and GPU
work and decoded on demand (``Op.inputs``), and dropped for the rest.

``trace_load`` reads a file or bytes into a Trace; ``trace_build`` files the decoded events
and links them.
"""

from __future__ import annotations

import builtins
import re
import struct
from array import array
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterator, Sequence
from itertools import groupby, islice
from operator import attrgetter, le
from sys import intern
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Union, overload

import msgspec

__all__ = [
    "CPU_OP",
    "GPU_CATS",
    "GPU_USER_ANNOTATION",
    "HIDDEN_OPS",
    "KINETO_CATS",
    "PYTHON_FUNCTION",
    "RUNTIME_CATS",
    "STEP_PREFIX",
    "USER_ANNOTATION",
    "Event",
    "FrameColumns",
    "GpuEvent",
    "Op",
    "OpInputs",
    "Step",
    "Trace",
    "TraceError",
]

CPU_OP = "cpu_op"
USER_ANNOTATION = "user_annotation"
PYTHON_FUNCTION = "python_function"
GPU_USER_ANNOTATION = "gpu_user_annotation"
#: Host-side calls into the GPU runtime or driver (launches, copies, syncs).
RUNTIME_CATS = frozenset(
    {"cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver", "xpu_runtime"}
)
#: GPU work that occupies a stream.
GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
#: Ops torch drops before building its tables (``torch.autograd.profiler_util._filter_name``).
HIDDEN_OPS = frozenset(
    {
        "[memory]",
        "[OutOfMemory]",
        "profiler::_record_function_enter",
        "profiler::_record_function_enter_new",
        "profiler::_record_function_exit",
        "aten::is_leaf",
        "aten::output_nr",
        "aten::_version",
    }
)
STEP_PREFIX = "ProfilerStep#"
#: Every category Kineto writes on complete events (libkineto's ActivityType names, torch
#: 2.2-2.13), torch's own "Trace" span and the ROCm runtime's. Decoded as constants: no string
#: per event. A trace with another category is decoded again with categories as strings.
KINETO_CATS = (
    "",
    "cpu_op",
    "user_annotation",
    "gpu_user_annotation",
    "gpu_memcpy",
    "gpu_memset",
    "kernel",
    "external_correlation",
    "cuda_runtime",
    "cuda_driver",
    "cpu_instant_event",
    "python_function",
    "overhead",
    "mtia_runtime",
    "mtia_ccp_events",
    "mtia_insight",
    "cuda_sync",
    "cuda_event",
    "mtia_counters",
    "glow_runtime",
    "cuda_profiler_range",
    "hpu_op",
    "xpu_runtime",
    "xpu_driver",
    "collective_comm",
    "privateuse1_runtime",
    "privateuse1_driver",
    "xpu_scope_profiler",
    "hip_runtime",
    "hip_driver",
    "Trace",
)
#: Chrome trace phases other than "X" (complete span); events of these are not read.
OTHER_PHASES = tuple("BEiICbnestfPONDMVvRc")

_LIMIT_US = 1e18  # |ts| and dur beyond this (31,000 years) are corrupt, not data
#: The args of an event that has none, or whose args are not kept.
NO_RAW = msgspec.Raw(b"{}")
_TS = attrgetter("ts")
_DUR = attrgetter("dur")
_INDEX = attrgetter("index")
_NAME = attrgetter("name")
_PID = attrgetter("pid")
_TID = attrgetter("tid")
_HALF_NS_US = 0.0005  # Kineto writes µs with 3 decimals: times this close are equal


class TraceError(Exception):
    """The input cannot be read as a Kineto trace; the message is one line."""


class Event(msgspec.Struct, tag_field="ph", tag="X", gc=False):
    """A complete ("X") Chrome trace event, only the fields kernelscope reads; ``args`` is
    left undecoded. Times are µs."""

    name: str
    ts: Annotated[float, msgspec.Meta(ge=-_LIMIT_US, le=_LIMIT_US)]
    dur: Annotated[float, msgspec.Meta(ge=0.0, le=_LIMIT_US)]
    cat: str = ""
    pid: int | str = 0
    tid: int | str = 0
    args: msgspec.Raw = NO_RAW

    @property
    def end(self) -> float:
        """End time in µs."""
        return self.ts + self.dur


class _OtherEvent(msgspec.Struct, tag_field="ph", gc=False):
    """An event of another phase (metadata, instant, flow ...): nothing is read from it."""

    cat: ClassVar[str] = ""  # files it under "", a category nothing reads


#: A Struct per phase of OTHER_PHASES (msgspec needs one class per tag).
OTHER_PHASE_EVENTS = [
    msgspec.defstruct(f"_Phase{p}", [], bases=(_OtherEvent,), tag=p) for p in OTHER_PHASES
]
#: An Event whose category is one of KINETO_CATS, decoded as that constant.
KinetoEvent: Any = msgspec.defstruct(
    "_KinetoEvent", [("cat", Literal[KINETO_CATS], "")], bases=(Event,), tag="X", gc=False
)

#: Any event of the file: an Event, or one of another phase.
if TYPE_CHECKING:
    AnyEvent = Event | _OtherEvent
else:  # msgspec needs one class per tag
    AnyEvent = Union[(Event, *OTHER_PHASE_EVENTS)]


class OpInputs(msgspec.Struct, frozen=True):
    """Shapes and dtypes an op was called with (present with ``record_shapes=True``)."""

    dims: list[Any] = msgspec.field(default_factory=list[Any], name="Input Dims")
    types: list[str] = msgspec.field(default_factory=list[str], name="Input type")
    strides: list[Any] = msgspec.field(default_factory=list[Any], name="Input Strides")


class _ExternalId(msgspec.Struct, gc=False):
    value: int = msgspec.field(default=-1, name="External id")


_EXTERNAL_ID_FIRST = re.compile(rb'\{\s*"External id"\s*:\s*(-?\d+)\s*[,}]')
_INPUTS_DECODER = msgspec.json.Decoder(OpInputs)
_EXTERNAL_ID_DECODER = msgspec.json.Decoder(_ExternalId)


class Op(msgspec.Struct, array_like=True, gc=False):
    """A host span: an aten op (``cpu_op``), a ``record_function`` (``user_annotation``) or a
    runtime/driver call (``cudaLaunchKernel``, ``cuLaunchKernelEx``, ``cudaMemcpyAsync`` ...).

    ``index`` and ``parent`` are positions in ``Trace.ops``; ``parent`` is the innermost span
    on the same thread that contains this one (-1 at top level); ``Trace.children`` lists the
    children. ``self_dur`` is ``dur`` less the children's. ``correlation`` is set on
    runtime/driver calls; their ``args`` are not kept (``{}``).
    """

    cat: str
    name: str
    pid: int | str
    tid: int | str
    ts: float
    dur: float
    args: bytes
    self_dur: float
    correlation: int = -1
    index: int = -1
    parent: int = -1

    @property
    def end(self) -> float:
        """End time in µs."""
        return self.ts + self.dur

    @property
    def is_runtime(self) -> bool:
        """True for runtime/driver calls."""
        return self.cat in RUNTIME_CATS

    def external_id(self) -> int:
        """The ``External id`` in the op's args (read on each call), -1 when absent."""
        match = _EXTERNAL_ID_FIRST.match(self.args)  # Kineto writes it first: no full decode
        if match:
            return int(match[1])
        try:
            return _EXTERNAL_ID_DECODER.decode(self.args).value
        except msgspec.MsgspecError:
            return -1

    def inputs(self) -> OpInputs:
        """``Input Dims`` and ``Input type`` (decoded on each call); empty when absent or bad."""
        try:
            return _INPUTS_DECODER.decode(self.args)
        except msgspec.MsgspecError:
            return OpInputs()


class GpuEvent(msgspec.Struct, array_like=True, gc=False):
    """A kernel, memcpy or memset on a GPU stream.

    ``launch`` is the position in ``Trace.ops`` of the runtime/driver call with the same
    ``correlation``, ``op`` that of the cpu_op or user_annotation that launched it; -1 when
    unknown. ``bytes`` is set on memcpys and memsets.
    """

    cat: str
    name: str
    ts: float
    dur: float
    device: int
    stream: int
    correlation: int
    external_id: int
    bytes: int
    args: builtins.bytes  # the field above shadows the type in this class's namespace
    launch: int = -1
    op: int = -1

    @property
    def end(self) -> float:
        """End time in µs."""
        return self.ts + self.dur


class Step(msgspec.Struct, frozen=True, gc=False):
    """One profiler step, or the window that stands in for the steps."""

    name: str
    ts: float
    dur: float

    @property
    def end(self) -> float:
        """End time in µs."""
        return self.ts + self.dur


Thread = tuple[int | str, int | str]


def _pack(code: str, values: list[Any]) -> bytes:
    """``values`` as a C array's bytes (``array`` typecode ``code``); faster than extending
    an array from an iterator, which grows it an item at a time."""
    return struct.pack(f"{len(values)}{code}", *values)


class FrameColumns(Sequence[Event]):
    """``python_function`` frames as columns (a name and a thread index per frame, its
    start and duration): a tenth of their size as Events, and sent between processes as
    a few arrays. Indexing makes the Event."""

    __slots__ = ("_name_ids", "_thread_ids", "dur", "name", "names", "thread", "threads", "ts")

    def __init__(self) -> None:
        self.names: list[str] = []
        self.threads: list[Thread] = []
        self.name = array("I")
        self.thread = array("I")
        self.ts = array("d")
        self.dur = array("d")
        self._name_ids: dict[str, int] = {}
        self._thread_ids: dict[Thread, int] = {}

    def add(self, frames: list[Event]) -> None:
        """Appends frames (C-level passes over them: no Python per frame)."""
        if not frames:
            return
        names: list[str] = list(map(_NAME, frames))
        for name in set(names).difference(self._name_ids):
            self._id(self._name_ids, self.names, name)
        self.name.frombytes(_pack("I", list(map(self._name_ids.__getitem__, names))))
        ids = self._thread_ids
        for tid, run in groupby(frames, _TID):  # Kineto writes long runs of one thread
            pids: list[int | str] = list(map(_PID, run))
            if pids.count(pids[0]) == len(pids):
                one = self._id(ids, self.threads, (pids[0], tid))
                self.thread.frombytes(_pack("I", [one]) * len(pids))
                continue
            threads: list[Thread] = [(pid, tid) for pid in pids]
            for thread in set(threads).difference(ids):
                self._id(ids, self.threads, thread)
            self.thread.frombytes(_pack("I", list(map(ids.__getitem__, threads))))
        self.ts.frombytes(_pack("d", list(map(_TS, frames))))
        self.dur.frombytes(_pack("d", list(map(_DUR, frames))))

    def extend(self, other: FrameColumns) -> None:
        """Appends another's frames (its names and threads mapped to this one's)."""
        names = [self._id(self._name_ids, self.names, intern(n)) for n in other.names]
        threads = [self._id(self._thread_ids, self.threads, t) for t in other.threads]
        self.name.extend(map(names.__getitem__, other.name))
        self.thread.extend(map(threads.__getitem__, other.thread))
        self.ts.extend(other.ts)
        self.dur.extend(other.dur)

    @staticmethod
    def _id(ids: dict[Any, int], values: list[Any], value: Any) -> int:
        i = ids.get(value)
        if i is None:
            i = ids[value] = len(values)
            values.append(value)
        return i

    def by_start(self) -> FrameColumns:
        """The frames sorted by start (itself when they are)."""
        ts = self.ts
        if all(map(le, ts, islice(ts, 1, None))):
            return self
        order = sorted(range(len(ts)), key=ts.__getitem__)
        out = FrameColumns()
        out.names, out.threads = self.names, self.threads
        out._name_ids, out._thread_ids = self._name_ids, self._thread_ids
        out.name = array("I", map(self.name.__getitem__, order))
        out.thread = array("I", map(self.thread.__getitem__, order))
        out.ts = array("d", map(ts.__getitem__, order))
        out.dur = array("d", map(self.dur.__getitem__, order))
        return out

    def around(self, op: Event | Op, last: int) -> Iterator[Event]:
        """The frames up to ``last`` (by start) that hold ``op`` on its thread, innermost
        first (``Trace.python_frames``)."""
        thread = self._thread_ids.get((op.pid, op.tid))
        if thread is None:
            return
        ts, dur, threads = self.ts, self.dur, self.thread
        for i in range(last, -1, -1):
            if threads[i] == thread and op.ts - ts[i] + op.dur <= dur[i] + _HALF_NS_US:
                yield self[i]

    def __len__(self) -> int:
        return len(self.ts)

    @overload
    def __getitem__(self, i: int) -> Event: ...
    @overload
    def __getitem__(self, i: slice) -> list[Event]: ...
    def __getitem__(self, i: int | slice) -> Event | list[Event]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        pid, tid = self.threads[self.thread[i]]
        return Event(self.names[self.name[i]], self.ts[i], self.dur[i], PYTHON_FUNCTION, pid, tid)

    def encode(self) -> FrameArrays:
        """The columns as bytes, to send."""
        return FrameArrays(
            self.names, self.threads, self.name.tobytes(), self.thread.tobytes(),
            self.ts.tobytes(), self.dur.tobytes(),
        )  # fmt: skip

    @classmethod
    def decode(cls, sent: FrameArrays) -> FrameColumns:
        """The columns ``encode`` sent."""
        out = cls()
        for name in sent.names:
            cls._id(out._name_ids, out.names, name)
        for pid, tid in sent.threads:
            cls._id(out._thread_ids, out.threads, (pid, tid))
        for column, data in zip(
            (out.name, out.thread, out.ts, out.dur), sent.columns(), strict=True
        ):
            column.frombytes(data)
        return out


class FrameArrays(msgspec.Struct, array_like=True, gc=False):
    """FrameColumns as bytes (``FrameColumns.encode``), to send between processes."""

    names: list[str]
    threads: list[tuple[int | str, int | str]]
    name: bytes
    thread: bytes
    ts: bytes
    dur: bytes

    def columns(self) -> tuple[bytes, bytes, bytes, bytes]:
        return self.name, self.thread, self.ts, self.dur


class Trace(msgspec.Struct):
    """A Kineto trace with host spans nested and GPU work linked. Times are µs floats."""

    ops: list[Op]
    """Every cpu_op, user_annotation and runtime/driver call, sorted by (ts, -dur)."""
    cpu_ops: list[Op]
    """The ops of ``ops`` that are aten ops (and other ``cpu_op``s), in the same order."""
    user_annotations: list[Op]
    """The ops of ``ops`` that are ``record_function`` ranges, in the same order."""
    launches: list[Op]
    """The ops of ``ops`` that are runtime/driver calls (launches, copies, syncs)."""
    python_functions: Sequence[Event]
    """The ``with_stack`` frames of the user's code (``user_code``; the others, most of a
    trace, are dropped as it is read: no analysis reads them), in file order (Kineto writes
    them sorted by ts), without their args: a list, or FrameColumns when the file was read
    by several processes."""
    gpu_events: list[GpuEvent]
    """Kernels, memcpys and memsets, sorted by ts."""
    gpu_annotations: list[Event]
    """GPU-side spans of annotations, sorted by ts, without their args."""
    steps: list[Step]
    device_properties: list[dict[str, Any]]
    base_time_ns: int | None
    warnings: list[str]
    frames_seen: int = 0
    """How many ``python_function`` frames the file has, the user's and the others."""
    world_size: int | None = None
    """The process group's size, from Kineto's ``distributedInfo`` (None outside one)."""
    rank: int | None = None
    backend: str | None = None
    _threads: dict[tuple[int | str, int | str], list[int]] | None = None
    _frames: tuple[Sequence[Event], Sequence[float]] | None = None

    def children(self, op: Op) -> list[Op]:
        """The ops directly inside ``op``, in time order (a scan of the ops in its span)."""
        out: list[Op] = []
        end = op.end
        for i in range(op.index + 1, len(self.ops)):
            other = self.ops[i]
            if other.ts > end:
                break
            if other.parent == op.index:
                out.append(other)
        return out

    def ops_overlapping(self, start: float, end: float) -> list[Op]:
        """The ops that overlap [start, end), in ``ops`` order: those that start inside it and
        those still open at ``start``. A bisection per thread, not a scan of the trace. (An
        op that straddles another, from clock skew, can hide that other from the second
        kind.)"""
        ops = self.ops
        first, stop = bisect_left(ops, start, key=_TS), bisect_left(ops, end, key=_TS)
        if self._threads is None:
            self._threads = defaultdict(list)
            for op in ops:
                self._threads[op.pid, op.tid].append(op.index)
        open_ops: list[Op] = []
        for indexes in self._threads.values():
            # the thread's last op before start, then its parents: all that can be open then
            k = bisect_left(indexes, first) - 1
            i = indexes[k] if k >= 0 else -1
            while i >= 0:
                op = ops[i]
                if op.ts + op.dur > start:
                    open_ops.append(op)
                i = op.parent
        open_ops.sort(key=_INDEX)
        return open_ops + ops[first:stop]

    def python_frames(self, op: Event | Op) -> Iterator[Event]:
        """The user's ``python_function`` frames around ``op`` on its thread, innermost
        first (none without ``with_stack``). Lazy: it walks back from the op's start through
        the frames that began before it, as far as it is iterated."""
        if self._frames is None:
            self._frames = _by_start(self.python_functions)
        frames, starts = self._frames
        last = bisect_right(starts, op.ts + _HALF_NS_US) - 1
        if isinstance(frames, FrameColumns):
            yield from frames.around(op, last)
            return
        for i in range(last, -1, -1):
            frame = frames[i]
            # relative times: exact at Kineto's ~5e12 µs timestamps, where an ulp is ~1 ns
            inside = op.ts - frame.ts + op.dur <= frame.dur + _HALF_NS_US
            if inside and frame.tid == op.tid and frame.pid == op.pid:
                yield frame


def _by_start(frames: Sequence[Event]) -> tuple[Sequence[Event], Sequence[float]]:
    """Frames sorted by start, and their starts."""
    if isinstance(frames, FrameColumns):
        frames = frames.by_start()
        return frames, frames.ts
    starts = list(map(_TS, frames))
    if all(map(le, starts, islice(starts, 1, None))):
        return frames, starts
    frames = sorted(frames, key=_TS)
    return frames, list(map(_TS, frames))
