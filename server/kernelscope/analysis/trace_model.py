"""Kineto Chrome traces (torch.profiler ``export_chrome_trace``) read into a linked model.

The file is decoded a piece at a time (``trace_stream``) into view Structs (``args`` left
undecoded, spans validated by msgspec, Kineto's categories decoded as constants); each piece's
events are filed by category as they come, then host spans are nested per thread and GPU work
linked to its launch and to the op that made it. Of the args, only what linking needs is
decoded; the rest (``Input Dims`` ...) is kept as bytes for aten ops and GPU work and decoded
on demand, and dropped for the rest. A piece msgspec rejects is read again event by event,
and the bad events are skipped and counted in ``Trace.warnings``.

Cost (bench/trace_speed.py): see the README; peak memory is bounded by MEMORY_PER_BYTE of
the JSON, and a trace that needs more than the machine has is refused with its sizes.
"""

from __future__ import annotations

import builtins
import gzip
import json
import re
import struct
import zlib
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from collections.abc import Generator, Iterable, Iterator, Sequence
from contextlib import closing
from itertools import compress, groupby, islice
from operator import attrgetter, eq, le
from pathlib import Path
from sys import intern
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypeVar, Union, cast, overload

import msgspec

from kernelscope.analysis.memory_budget import OutOfMemory, available_bytes, require, rss_bytes
from kernelscope.analysis.trace_segments import (
    CHILD_BYTES,
    SEGMENT_BYTES,
    ProcessesUnavailable,
    Segment,
    layout,
    piece,
    processes,
    segments,
)
from kernelscope.analysis.trace_segments import run as run_apart
from kernelscope.analysis.trace_stream import (
    GZIP_MAGIC,
    Chunk,
    EventPieces,
    NotStreamable,
    Progress,
    file_chunks,
    is_gzip,
)
from kernelscope.analysis.user_code import is_user_frame
from kernelscope.units import fmt_bytes

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
    "decode_trace",
    "load_trace",
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
_NO_RAW = msgspec.Raw(b"{}")
_NO_ARGS = b"{}"
_TS = attrgetter("ts")
_DUR = attrgetter("dur")
_INDEX = attrgetter("index")
_CAT = attrgetter("cat")
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
    args: msgspec.Raw = _NO_RAW

    @property
    def end(self) -> float:
        """End time in µs."""
        return self.ts + self.dur


class _OtherEvent(msgspec.Struct, tag_field="ph", gc=False):
    """An event of another phase (metadata, instant, flow ...): nothing is read from it."""

    cat: ClassVar[str] = ""  # files it under "", a category nothing reads


_PHASES = [msgspec.defstruct(f"_Phase{p}", [], bases=(_OtherEvent,), tag=p) for p in OTHER_PHASES]
#: An Event whose category is one of KINETO_CATS, decoded as that constant.
_KinetoEvent: Any = msgspec.defstruct(
    "_KinetoEvent", [("cat", Literal[KINETO_CATS], "")], bases=(Event,), tag="X", gc=False
)

if TYPE_CHECKING:
    _AnyEvent = Event | _OtherEvent
else:  # msgspec needs one class per tag
    _AnyEvent = Union[(Event, *_PHASES)]


class OpInputs(msgspec.Struct, frozen=True):
    """Shapes and dtypes an op was called with (present with ``record_shapes=True``)."""

    dims: list[Any] = msgspec.field(default_factory=list[Any], name="Input Dims")
    types: list[str] = msgspec.field(default_factory=list[str], name="Input type")
    strides: list[Any] = msgspec.field(default_factory=list[Any], name="Input Strides")


class _ExternalId(msgspec.Struct, gc=False):
    value: int = msgspec.field(default=-1, name="External id")


class _RuntimeArgs(msgspec.Struct, gc=False):
    correlation: int = -1


class _GpuArgs(msgspec.Struct, gc=False):
    correlation: int = -1
    external_id: int = msgspec.field(default=-1, name="External id")
    device: int = -1
    stream: int = -1
    bytes: int = 0


_EXTERNAL_ID_FIRST = re.compile(rb'\{\s*"External id"\s*:\s*(-?\d+)\s*[,}]')
_INPUTS_DECODER = msgspec.json.Decoder(OpInputs)
_EXTERNAL_ID_DECODER = msgspec.json.Decoder(_ExternalId)
#: (decoder of many events' args, decoder of one's, the args when malformed)
_RUNTIME_ARGS = (
    msgspec.json.Decoder(list[_RuntimeArgs]),
    msgspec.json.Decoder(_RuntimeArgs),
    _RuntimeArgs(),
)
_GPU_ARGS = (msgspec.json.Decoder(list[_GpuArgs]), msgspec.json.Decoder(_GpuArgs), _GpuArgs())


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

    def encode(self) -> _FrameArrays:
        """The columns as bytes, to send."""
        return _FrameArrays(
            self.names, self.threads, self.name.tobytes(), self.thread.tobytes(),
            self.ts.tobytes(), self.dur.tobytes(),
        )  # fmt: skip

    @classmethod
    def decode(cls, sent: _FrameArrays) -> FrameColumns:
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


class _FrameArrays(msgspec.Struct, array_like=True, gc=False):
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


class _Distributed(msgspec.Struct):
    """Kineto's ``distributedInfo``: the process group the trace's process was in."""

    backend: str | None = None
    rank: int | None = None
    world_size: int | None = None


_DISTRIBUTED = msgspec.json.Decoder(_Distributed)


class _TraceView(msgspec.Struct, rename="camel"):
    trace_events: list[_AnyEvent]
    device_properties: list[dict[str, Any]] = []
    base_time_nanoseconds: int | None = None
    distributed_info: _Distributed | None = None


class _LooseTraceView(msgspec.Struct, rename="camel"):
    trace_events: list[msgspec.Raw]
    device_properties: msgspec.Raw = _NO_RAW
    base_time_nanoseconds: msgspec.Raw = _NO_RAW
    distributed_info: msgspec.Raw = _NO_RAW


_KinetoTraceView: Any = msgspec.defstruct(
    "_KinetoTraceView",
    [("trace_events", list[Union[(_KinetoEvent, *_PHASES)]])],
    bases=(_TraceView,),
)
_KINETO_VIEW_DECODER: msgspec.json.Decoder[_TraceView] = msgspec.json.Decoder(_KinetoTraceView)
_VIEW_DECODER = msgspec.json.Decoder(_TraceView)
_LOOSE_DECODER = msgspec.json.Decoder(_LooseTraceView)
_EVENT_DECODER = msgspec.json.Decoder(_AnyEvent)


#: Peak memory of a load per byte of JSON (bench/trace_speed.py measures it), with a margin.
MEMORY_PER_BYTE = 1.5
#: The share of a file read before its memory's growth is first measured.
_WATCH_AFTER = 0.05
_MAX_INFLATION = 1032


def load_trace(path: str | Path, progress: Progress | None = None) -> Trace:
    """Read a Kineto trace from a plain or gzip JSON file (told apart by the magic bytes),
    a piece at a time (``trace_stream``); ``progress`` is told how much of the file is read.
    A trace that would need more memory than there is is refused before it is read (or, for
    a gzip file whose size shows only as it inflates, as soon as that shows)."""
    path = Path(path)
    try:
        size = path.stat().st_size
        gzipped = size > 0 and is_gzip(path)
        inflated = _gzip_size(path, size) if gzipped else size
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc.strerror or exc}") from None
    if size == 0:
        raise TraceError("the trace file is empty")
    _require_memory(int(inflated * MEMORY_PER_BYTE), size, gzipped)
    watch = _MemoryWatch(gzipped, progress)
    try:
        workers = processes(inflated, gzipped)
        room = available_bytes()
        need = int(inflated * MEMORY_PER_BYTE) + workers * CHILD_BYTES
        if workers > 1 and (room is None or need <= room):
            trace = _load_apart(path, size, gzipped, workers, watch)
            if trace is not None:
                return trace
        return _Builder().stream(file_chunks(path, watch, gzipped=gzipped))
    except NotStreamable:
        pass
    except (EOFError, zlib.error) as exc:
        raise TraceError(f"corrupt or truncated gzip: {exc}") from None
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc.strerror or exc}") from None
    except MemoryError:
        raise TraceError(_out_of_memory(size, gzipped)) from None
    # Not laid out as Kineto writes: read whole, and say what is wrong with it. That takes
    # the file, its inflated bytes and a decode of them at once.
    _require_memory(inflated * 3 + (size if gzipped else 0), size, gzipped)
    try:
        return _decode_whole(_decompress(path.read_bytes()))
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc.strerror or exc}") from None
    except MemoryError:
        raise TraceError(_out_of_memory(size, gzipped)) from None


def _load_apart(
    path: Path, size: int, gzipped: bool, workers: int, progress: Progress
) -> Trace | None:
    """The trace read by ``workers`` processes; None when one stream must read it (a
    segment did not decode, or the processes could not run)."""
    try:
        if not gzipped:
            return _load_segments(path, size, workers, progress)
        with closing(file_chunks(path, progress, SEGMENT_BYTES, gzipped=True)) as chunks:
            return _load_pieces(chunks, workers)
    except ProcessesUnavailable:
        return None


def _load_segments(path: Path, size: int, workers: int, progress: Progress) -> Trace | None:
    """The trace read by ``workers`` processes, a segment each at a time (``trace_segments``);
    None when the file is not laid out for it or a segment does not decode."""
    where = layout(path, size)
    if where is None:
        return None
    tasks = segments(path, where, workers)
    builder = _Builder(columnar=True)
    with closing(run_apart(_filed_segment, tasks, workers)) as results:
        for task, sent in zip(tasks, results, strict=True):
            if sent is None:
                return None
            builder.take(sent)
            progress(task.hi, size)
    return builder.finish_top(where.top_level)


def _load_pieces(chunks: Generator[Chunk], workers: int) -> Trace | None:
    """The trace of a stream of chunks (an inflating gzip), its pieces decoded by ``workers``
    processes; None when a piece does not decode. The pieces are cut as they come, where a
    decode would be tried first (``EventPieces`` with no decode), so a wrong cut shows in a
    child; NotStreamable as the stream raises it."""
    pieces = EventPieces(chunks, bytes)
    builder = _Builder(columnar=True)
    with closing(run_apart(_filed_piece, pieces, workers)) as results:
        for sent in results:
            if sent is None:
                return None
            builder.take(sent)
    return builder.finish_top(pieces.top_level)


def _filed_segment(segment: Segment) -> bytes | None:
    """In a child: the segment's events filed, to send; None when they do not decode."""
    return _filed_piece(piece(segment))


def _filed_piece(events: bytes | bytearray) -> bytes | None:
    """In a child: a piece's events (a JSON array) filed, to send; None when they do not
    decode."""
    builder = _Builder(columnar=True)
    try:
        builder.add(builder.decode(memoryview(events)))
    except (msgspec.DecodeError, RecursionError):
        return None
    return builder.sent()


def _out_of_memory(size: int, gzipped: bool) -> str:
    kind = "gzip trace" if gzipped else "trace"
    return (
        f"ran out of memory reading this {fmt_bytes(size)} {kind}; analyze it on a machine "
        "with more memory, or record a shorter trace"
    )


def decode_trace(data: bytes) -> Trace:
    """Build a Trace from the bytes of a Kineto trace, plain JSON or gzip."""
    data = _decompress(data)
    try:
        return _Builder().stream(iter([Chunk.of(data)]))
    except NotStreamable:
        return _decode_whole(data)


def _decode_whole(data: bytes) -> Trace:
    view, warnings = _decode_view(data)
    builder = _Builder()
    builder.warnings.update(warnings)
    builder.add(view.trace_events)
    return builder.finish(view.device_properties, view.base_time_nanoseconds, view.distributed_info)


def _decompress(data: bytes) -> bytes:
    if not data:
        raise TraceError("the trace file is empty")
    if not data.startswith(GZIP_MAGIC):
        return data
    try:
        data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceError(f"corrupt or truncated gzip: {exc}") from None
    if not data:
        raise TraceError("the trace file is empty")
    return data


def _gzip_size(path: Path, size: int) -> int:
    """The inflated size as the gzip trailer gives it: modulo 4 GiB, and the last member's
    only, so a lower bound at most; never below the file's own size."""
    with path.open("rb") as f:
        f.seek(max(size - 4, 0))
        trailer = f.read(4)
    stated = int.from_bytes(trailer, "little") if len(trailer) == 4 else 0
    # deflate inflates 1032x at most: more is a truncated file's last bytes, not a size
    return max(stated, size) if stated <= size * _MAX_INFLATION else size


def _require_memory(need: int, size: int, gzipped: bool) -> None:
    what = f"this {fmt_bytes(size)} gzip trace" if gzipped else f"this {fmt_bytes(size)} trace"
    try:
        require(need, f"analyzing {what}")
    except OutOfMemory as exc:
        raise TraceError(str(exc)) from None


class _MemoryWatch:
    """Passes progress on, and refuses a trace as soon as the memory it takes, growing as it
    has between the first reading (after 5 % of the file) and now, would exceed what is left
    by the end (a gzip's inflated size shows only as it inflates)."""

    def __init__(self, gzipped: bool, progress: Progress | None) -> None:
        self._gzipped = gzipped
        self._progress = progress
        self._first: tuple[int, int] | None = None  # (bytes read, RSS) at the first reading

    def __call__(self, done: int, total: int) -> None:
        if self._progress is not None:
            self._progress(done, total)
        if done < total * _WATCH_AFTER or done >= total:  # early on the buffers would dominate
            return
        now = rss_bytes()
        if now is None:
            return
        if self._first is None:
            self._first = (done, now)
            return
        read0, rss0 = self._first
        if done <= read0:
            return
        more = int((now - rss0) * (total - done) / (done - read0))
        room = available_bytes()
        if room is not None and more > room:
            kind = "gzip trace" if self._gzipped else "trace"
            raise TraceError(
                f"this {fmt_bytes(total)} {kind} needs about {fmt_bytes(now + more)} of memory "
                f"to analyze (as it grew over its first {done / total:.0%}) and only "
                f"{fmt_bytes(now + room)} is available here; stopped before running out. "
                "Analyze it on a machine with more memory, or record a shorter trace"
            )


def _decode_view(data: bytes) -> tuple[_TraceView, Counter[str]]:
    """Decode in one go when the trace is well formed (again, with categories as strings,
    when one is not Kineto's), else event by event."""
    for decoder in (_KINETO_VIEW_DECODER, _VIEW_DECODER):
        try:
            return decoder.decode(data), Counter()
        except msgspec.ValidationError:
            continue
        except (msgspec.DecodeError, RecursionError):
            break
    return _decode_loose(data)


def _decode_loose(data: bytes) -> tuple[_TraceView, Counter[str]]:
    """Decode what can be decoded, skipping and counting bad events and top-level fields."""
    try:
        loose = _LOOSE_DECODER.decode(data)
        raw_events: list[object] = list(loose.trace_events)
        top = {
            "deviceProperties": _decode_raw(loose.device_properties),
            "baseTimeNanoseconds": _decode_raw(loose.base_time_nanoseconds),
            "distributedInfo": _decode_raw(loose.distributed_info),
        }
    except msgspec.ValidationError:
        raise TraceError("not a Kineto trace: no traceEvents list") from None
    except RecursionError:
        raise TraceError("not a Kineto trace: JSON nested too deeply") from None
    except msgspec.DecodeError:
        top, raw_events = _decode_nonstandard(data)
    warnings: Counter[str] = Counter()
    events = _decode_each(raw_events, warnings)
    properties = top.get("deviceProperties")
    if not _is_list_of_dicts(properties):
        if properties is not None:
            warnings["ignored a malformed deviceProperties"] += 1
        properties = []
    base = top.get("baseTimeNanoseconds")
    base = base if isinstance(base, int) and not isinstance(base, bool) else None
    distributed: _Distributed | None = None
    if top.get("distributedInfo") is not None:
        try:
            distributed = msgspec.convert(top["distributedInfo"], _Distributed)
        except msgspec.ValidationError:
            warnings["ignored a malformed distributedInfo"] += 1
    properties = cast("list[dict[str, Any]]", properties)
    return _TraceView(events, properties, base, distributed), warnings


def _decode_raw(raw: msgspec.Raw) -> object:
    return msgspec.json.decode(raw) if raw is not _NO_RAW else None


def _decode_each(raw_events: Iterable[object], warnings: Counter[str]) -> list[_AnyEvent]:
    """The events one by one; the bad ones skipped and counted in ``warnings``."""
    events: list[_AnyEvent] = []
    for raw in raw_events:
        try:
            events.append(_decode_event(raw))
        except (msgspec.MsgspecError, OverflowError, RecursionError, TypeError, ValueError):
            warnings["skipped events with a bad or missing ph, name, ts or dur"] += 1
    return events


def _decode_event(raw: object) -> _AnyEvent:
    """One event from its JSON (a Raw) or from the standard library's parse of it."""
    if not isinstance(raw, msgspec.Raw):
        raw = msgspec.json.encode(raw)
    return _EVENT_DECODER.decode(raw)


def _is_list_of_dicts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(d, dict) for d in value)  # pyright: ignore[reportUnknownVariableType]


def _decode_nonstandard(data: bytes) -> tuple[dict[str, object], list[object]]:
    """Parse with the standard library, which also takes the NaN and Infinity that some
    writers emit; events are then re-encoded (NaN becomes null) and decoded one by one."""
    try:
        top: object = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise TraceError(f"not valid JSON: {exc}") from None
    if not isinstance(top, dict) or not isinstance(top.get("traceEvents"), list):  # pyright: ignore[reportUnknownMemberType]
        raise TraceError("not a Kineto trace: no traceEvents list")
    fields = cast("dict[str, object]", top)
    return fields, cast("list[object]", fields["traceEvents"])


_KINETO_EVENTS: msgspec.json.Decoder[list[_AnyEvent]] = msgspec.json.Decoder(
    list[Union[(_KinetoEvent, *_PHASES)]]  # pyright: ignore[reportInvalidTypeForm]
)
_EVENTS = msgspec.json.Decoder(list[_AnyEvent])
_RAW_EVENTS = msgspec.json.Decoder(list[msgspec.Raw])
_PROPERTIES = msgspec.json.Decoder(list[dict[str, Any]])


class _Builder:
    """Files the events of each piece as they come (names shared, only the
    args that analyses read kept, as copies: the pieces are freed), then links them."""

    def __init__(self, columnar: bool = False) -> None:
        self.warnings: Counter[str] = Counter()
        self._decoded = 0
        self._cpu_ops: list[Op] = []
        self._annotations: list[Op] = []
        self._launches: list[Op] = []
        self._gpu: list[GpuEvent] = []
        self._frames: list[Event] = []
        self._columns = FrameColumns() if columnar else None
        self._gpu_annotations: list[Event] = []
        self._frames_seen = 0

    def stream(self, chunks: Iterator[Chunk]) -> Trace:
        """The trace of a document's chunks; raises NotStreamable (nothing kept)."""
        pieces = EventPieces(chunks, self.decode)
        for events in pieces:
            self.add(events)
        return self.finish_top(pieces.top_level)

    def finish_top(self, top: dict[str, msgspec.Raw]) -> Trace:
        """``finish`` with what the document's other fields give."""
        properties: list[dict[str, Any]] = []
        if "deviceProperties" in top:
            try:
                properties = _PROPERTIES.decode(top["deviceProperties"])
            except msgspec.MsgspecError:
                self.warnings["ignored a malformed deviceProperties"] += 1
        base: int | None = None
        if "baseTimeNanoseconds" in top:
            try:
                value = msgspec.json.decode(top["baseTimeNanoseconds"])
            except msgspec.MsgspecError:  # 1e999 and such
                value = None
            base = value if isinstance(value, int) and not isinstance(value, bool) else None
        distributed: _Distributed | None = None
        if "distributedInfo" in top:
            try:
                distributed = _DISTRIBUTED.decode(top["distributedInfo"])
            except msgspec.MsgspecError:
                self.warnings["ignored a malformed distributedInfo"] += 1
        return self.finish(properties, base, distributed)

    def decode(self, piece: memoryview) -> list[_AnyEvent]:
        """Events of one piece; bad events skipped and counted. DecodeError on bad JSON."""
        for decoder in (_KINETO_EVENTS, _EVENTS):
            try:
                return decoder.decode(piece)
            except msgspec.ValidationError:
                continue
        return _decode_each(_RAW_EVENTS.decode(piece), self.warnings)

    def add(self, events: list[_AnyEvent]) -> None:
        """Files one piece's events."""
        self._decoded += len(events)
        buckets = _bucket_by_cat(cast("list[Event]", events))
        for cat, bucket in buckets.items():
            if cat == PYTHON_FUNCTION:
                self._frames_seen += len(bucket)
                frames = _user_frames(bucket)
                if self._columns is not None:
                    self._columns.add(frames)
                    continue
                self._frames += _spans(frames)
            elif cat == GPU_USER_ANNOTATION:
                self._gpu_annotations += _spans(bucket)
            elif cat in (CPU_OP, USER_ANNOTATION):
                kept_ops = self._cpu_ops if cat == CPU_OP else self._annotations
                kept_ops += _host_ops(bucket)
            elif cat in RUNTIME_CATS:
                self._launches += _runtime_calls(bucket, self.warnings)
            elif cat in GPU_CATS:
                self._gpu += _gpu_events(bucket, self.warnings)

    def finish(
        self,
        device_properties: list[dict[str, Any]],
        base_time_ns: int | None,
        distributed: _Distributed | None = None,
    ) -> Trace:
        """Nests the host spans, links the GPU work, and makes the Trace."""
        if not self._decoded:
            raise TraceError("the trace has no readable events")
        cpu_ops, annotations, launches = self._cpu_ops, self._annotations, self._launches
        ops = cpu_ops + annotations + launches
        straddling = _nest_sorted(ops)
        gpu = self._gpu
        gpu.sort(key=_TS)
        _link(ops, launches, gpu, straddling)
        for group in (cpu_ops, annotations, launches):
            group.sort(key=_INDEX)
        self._gpu_annotations.sort(key=_TS)
        return Trace(
            ops=ops,
            cpu_ops=cpu_ops,
            user_annotations=annotations,
            launches=launches,
            python_functions=self._frames if self._columns is None else self._columns,
            gpu_events=gpu,
            gpu_annotations=self._gpu_annotations,
            steps=_steps(annotations, cpu_ops),
            device_properties=device_properties,
            base_time_ns=base_time_ns,
            warnings=[f"{reason}: {n}" for reason, n in sorted(self.warnings.items())],
            frames_seen=self._frames_seen,
            world_size=distributed.world_size if distributed else None,
            rank=distributed.rank if distributed else None,
            backend=distributed.backend if distributed else None,
        )

    def sent(self) -> bytes:
        """In a child: what it filed, to send to the parent (``take``)."""
        assert self._columns is not None
        return _FILED_ENCODER.encode(
            _Filed(
                self._decoded, dict(self.warnings), self._cpu_ops, self._annotations,
                self._launches, self._gpu,
                [(e.name, e.ts, e.dur, e.pid, e.tid) for e in self._gpu_annotations],
                self._columns.encode(), self._frames_seen,
            )
        )  # fmt: skip

    def take(self, sent: bytes) -> None:
        """Files what a child filed (``sent``), after what was filed before."""
        assert self._columns is not None
        filed = _FILED_DECODER.decode(sent)
        self._decoded += filed.decoded
        self._frames_seen += filed.frames_seen
        self.warnings.update(filed.warnings)
        for kept, more in (
            (self._cpu_ops, filed.cpu_ops),
            (self._annotations, filed.annotations),
            (self._launches, filed.launches),
        ):
            for op in more:  # one string per name and category, as the stream keeps them
                op.name, op.cat = intern(op.name), intern(op.cat)
            kept.extend(more)
        for event in filed.gpu:
            event.name, event.cat = intern(event.name), intern(event.cat)
        self._gpu += filed.gpu
        self._gpu_annotations += [
            Event(intern(name), ts, dur, GPU_USER_ANNOTATION, pid, tid)
            for name, ts, dur, pid, tid in filed.gpu_annotations
        ]
        self._columns.extend(FrameColumns.decode(filed.frames))


class _Filed(msgspec.Struct, array_like=True, gc=False):
    """What a child read of its segment."""

    decoded: int
    warnings: dict[str, int]
    cpu_ops: list[Op]
    annotations: list[Op]
    launches: list[Op]
    gpu: list[GpuEvent]
    gpu_annotations: list[tuple[str, float, float, int | str, int | str]]
    frames: _FrameArrays
    frames_seen: int


_FILED_ENCODER = msgspec.msgpack.Encoder()
_FILED_DECODER = msgspec.msgpack.Decoder(_Filed)


def _bucket_by_cat(events: list[Event]) -> defaultdict[str, list[Event]]:
    """Events by category; events of other phases all land under "", which nothing reads."""
    buckets: defaultdict[str, list[Event]] = defaultdict(list)
    for cat, run in groupby(events, _CAT):  # Kineto writes long runs of one category
        buckets[cat] += run
    return buckets


def _spans(events: list[Event]) -> list[Event]:
    """The events kept as spans: names shared, args dropped (nothing reads them; they would
    hold the piece)."""
    for e in events:
        e.name = intern(e.name)
        e.args = _NO_RAW
    return events


def _user_frames(frames: list[Event]) -> list[Event]:
    """The frames of the user's code (C-level passes; each distinct name looked at once)."""
    names: list[str] = list(map(_NAME, frames))
    user = {name for name in set(names) if is_user_frame(name)}
    return list(compress(frames, map(user.__contains__, names))) if user else []


def _host_ops(events: list[Event]) -> list[Op]:
    return [
        Op(e.cat, intern(e.name), e.pid, e.tid, e.ts, e.dur, bytes(e.args), e.dur)
        for e in events
        if e.name not in HIDDEN_OPS
    ]  # fmt: skip


def _runtime_calls(events: list[Event], warnings: Counter[str]) -> list[Op]:
    """Runtime/driver calls; of their args only the correlation is kept."""
    correlations = [a.correlation for a in _batch_args(events, _RUNTIME_ARGS, warnings)]
    return [
        Op(e.cat, intern(e.name), e.pid, e.tid, e.ts, e.dur, _NO_ARGS, e.dur, correlation)
        for e, correlation in zip(events, correlations, strict=True)
    ]  # fmt: skip


def _gpu_events(events: list[Event], warnings: Counter[str]) -> list[GpuEvent]:
    out: list[GpuEvent] = []
    for e, a in zip(events, _batch_args(events, _GPU_ARGS, warnings), strict=True):
        # Without args, Kineto's pid is the device and its tid the stream.
        device = a.device if a.device >= 0 or not isinstance(e.pid, int) else e.pid
        stream = a.stream if a.stream >= 0 or not isinstance(e.tid, int) else e.tid
        out.append(
            GpuEvent(
                e.cat, intern(e.name), e.ts, e.dur, device, stream, a.correlation,
                a.external_id, a.bytes, bytes(e.args),
            )
        )  # fmt: skip
    return out


_ArgsT = TypeVar("_ArgsT", bound=msgspec.Struct)


def _batch_args(
    events: list[Event],
    decoders: tuple[msgspec.json.Decoder[list[_ArgsT]], msgspec.json.Decoder[_ArgsT], _ArgsT],
    warnings: Counter[str],
) -> list[_ArgsT]:
    """The events' args, decoded in one call (one per event only when some are malformed)."""
    many, one, malformed = decoders
    if not events:
        return []
    try:
        return many.decode(b"[%b]" % b",".join([e.args for e in events]))
    except msgspec.MsgspecError:
        pass
    out: list[_ArgsT] = []
    for e in events:
        try:
            out.append(one.decode(e.args))
        except msgspec.MsgspecError:
            warnings[f"ignored malformed args of {e.cat} events"] += 1
            out.append(malformed)
    return out


def _nest_sorted(ops: list[Op]) -> set[int]:
    """Sort ops by (ts, -dur), the order torch nests in, and nest them (see ``_nest``)."""
    ops.sort(key=_TS)
    in_order, straddling = _nest(ops)
    if in_order:
        return straddling
    _order_ties(ops)
    for op in ops:
        op.self_dur = op.dur
        op.parent = -1
    return _nest(ops)[1]


def _order_ties(ops: list[Op]) -> None:
    """Put the longer of ops that start together first, so a parent precedes its child."""
    starts = list(map(_TS, ops))
    ties = list(compress(range(1, len(starts)), map(eq, starts, starts[1:])))
    k = 0
    while k < len(ties):
        first = last = ties[k]
        k += 1
        while k < len(ties) and ties[k] == last + 1:
            last = ties[k]
            k += 1
        ops[first - 1 : last + 1] = sorted(ops[first - 1 : last + 1], key=_DUR, reverse=True)


def _nest(ops: list[Op]) -> tuple[bool, set[int]]:
    """Set each op's index, parent and self time by time containment on its thread, as
    torch's ``EventList._populate_cpu_children`` does, without recursion.

    Returns whether ops that start together were longest first (else the tree is wrong and
    must be rebuilt) and the ops that start inside an op but end after it (clock skew).
    Times are compared in ns relative to the first op; Kineto writes µs with 3 decimals, so
    times within half a ns are equal.
    """
    straddling: set[int] = set()
    if not ops:
        return True, straddling
    in_order = True
    stacks: dict[tuple[int | str, int | str], tuple[list[float], list[Op]]] = {}
    t0 = ops[0].ts
    pid: int | str | None = None
    tid: int | str | None = None
    ends: list[float] = []
    open_ops: list[Op] = []
    previous_start = previous_dur = -1.0
    for index, op in enumerate(ops):
        op.index = index
        if op.tid != tid or op.pid != pid:
            pid, tid = op.pid, op.tid
            ends, open_ops = stacks.setdefault((pid, tid), ([], []))
        dur = op.dur
        start = (op.ts - t0) * 1000.0
        if start == previous_start and dur > previous_dur:
            in_order = False
        previous_start = start
        previous_dur = dur
        end = start + dur * 1000.0
        while ends:
            top = ends[-1]
            if start <= top - 0.5:
                if end <= top + 0.5:
                    parent = open_ops[-1]
                    op.parent = parent.index
                    parent.self_dur -= dur
                    break
                straddling.add(index)
            ends.pop()
            open_ops.pop()
        ends.append(end)
        open_ops.append(op)
    return in_order, straddling


def _link(
    ops: list[Op], launches: list[Op], gpu_events: list[GpuEvent], straddling: set[int]
) -> None:
    """Link each GPU event to its launch (same correlation) and to the op that launched it:
    the innermost cpu_op or user_annotation around the launch on its thread; where there is
    none, or the launch straddles an op, the op with the event's External id."""
    by_correlation = {op.correlation: op for op in launches if op.correlation >= 0}
    by_external_id: dict[int, int] | None = None
    for event in gpu_events:
        launch = by_correlation.get(event.correlation)
        owner = -1
        if launch is not None:
            event.launch = launch.index
            if launch.index not in straddling:
                owner = _launching_op(ops, launch)
        if owner < 0 and event.external_id >= 0:
            if by_external_id is None:
                by_external_id = _ops_by_external_id(ops)
            owner = by_external_id.get(event.external_id, -1)
        event.op = owner


def _launching_op(ops: list[Op], launch: Op) -> int:
    """The innermost cpu_op or user_annotation around a runtime call, -1 if none."""
    i = launch.parent
    while i >= 0 and ops[i].cat in RUNTIME_CATS:
        i = ops[i].parent
    return i


def _ops_by_external_id(ops: list[Op]) -> dict[int, int]:
    ids: dict[int, int] = {}
    for op in ops:
        if op.cat not in RUNTIME_CATS:
            external_id = op.external_id()
            if external_id >= 0:
                ids[external_id] = op.index
    return ids


def _steps(annotations: list[Op], cpu_ops: list[Op]) -> list[Step]:
    """``ProfilerStep#N`` annotations; else top-level annotations; else all CPU ops."""
    marked = [a for a in annotations if a.name.startswith(STEP_PREFIX)]
    if not marked:
        marked = [a for a in annotations if a.parent < 0]
    if marked:
        return [Step(a.name, a.ts, a.dur) for a in marked]
    if not cpu_ops:
        return []
    start = min(op.ts for op in cpu_ops)
    end = max(op.end for op in cpu_ops)
    return [Step("all", start, end - start)]
