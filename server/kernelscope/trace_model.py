"""Kineto Chrome traces (torch.profiler ``export_chrome_trace``) read into a linked model.

One msgspec decode into view Structs whose ``args`` stay undecoded, one pass that sorts events
by category, then host spans nested per thread and GPU work linked to its launch and its op.
Only the args that linking needs are decoded; the rest (``Input Dims`` ...) on demand.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections import Counter
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec

__all__ = [
    "Event",
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

_GZIP_MAGIC = b"\x1f\x8b"
_LIMIT_US = 1e18  # |ts| and dur beyond this (31,000 years) are corrupt, not data
_NO_RAW = msgspec.Raw(b"{}")


class TraceError(Exception):
    """The input cannot be read as a Kineto trace; the message is one line."""


class Event(msgspec.Struct, gc=False):
    """One Chrome trace event: only the fields kernelscope reads, ``args`` undecoded."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = float("nan")
    dur: float = float("nan")
    args: msgspec.Raw = _NO_RAW

    @property
    def end(self) -> float:
        """End time in µs."""
        return self.ts + self.dur


class OpInputs(msgspec.Struct, frozen=True):
    """Shapes and dtypes an op was called with (present with ``record_shapes=True``)."""

    dims: list[Any] = msgspec.field(default_factory=list, name="Input Dims")
    types: list[str] = msgspec.field(default_factory=list, name="Input type")


class _ExternalId(msgspec.Struct):
    value: int = msgspec.field(default=-1, name="External id")


class _RuntimeArgs(msgspec.Struct):
    correlation: int = -1


class _GpuArgs(msgspec.Struct):
    correlation: int = -1
    external_id: int = msgspec.field(default=-1, name="External id")
    device: int = -1
    stream: int = -1
    bytes: int = 0


_INPUTS_DECODER = msgspec.json.Decoder(OpInputs)
_EXTERNAL_ID_DECODER = msgspec.json.Decoder(_ExternalId)
_RUNTIME_ARGS_DECODER = msgspec.json.Decoder(_RuntimeArgs)
_GPU_ARGS_DECODER = msgspec.json.Decoder(_GpuArgs)


class Op(msgspec.Struct):
    """A host span: an aten op (``cpu_op``), a ``record_function`` (``user_annotation``) or a
    runtime/driver call (``cudaLaunchKernel``, ``cuLaunchKernelEx``, ``cudaMemcpyAsync`` ...).

    ``index``, ``parent`` and ``children`` are positions in ``Trace.ops``; ``parent`` is the
    innermost span on the same thread that contains this one, -1 at top level.
    """

    cat: str
    name: str
    pid: int | str
    tid: int | str
    ts: float
    dur: float
    args: msgspec.Raw
    correlation: int = -1
    index: int = -1
    parent: int = -1
    children: list[int] = []

    @property
    def end(self) -> float:
        """End time in µs."""
        return self.ts + self.dur

    @property
    def is_runtime(self) -> bool:
        """True for runtime/driver calls."""
        return self.cat in RUNTIME_CATS

    def external_id(self) -> int:
        """The op's ``External id`` (decoded on each call), -1 when absent."""
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


class GpuEvent(msgspec.Struct):
    """A kernel, memcpy or memset on a GPU stream.

    ``launch`` is the position in ``Trace.ops`` of the runtime/driver call with the same
    ``correlation``; ``op`` that of the cpu_op or user_annotation that launched it (by
    ``External id``, else the innermost op around the launch); -1 when unknown.
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
    args: msgspec.Raw
    launch: int = -1
    op: int = -1

    @property
    def end(self) -> float:
        """End time in µs."""
        return self.ts + self.dur


class Step(msgspec.Struct, frozen=True):
    """One profiler step (or the window that stands in for it)."""

    name: str
    ts: float
    dur: float

    @property
    def end(self) -> float:
        """End time in µs."""
        return self.ts + self.dur


class Trace(msgspec.Struct):
    """A Kineto trace: host spans nested, GPU work linked. Times are µs floats."""

    ops: list[Op]
    """Every cpu_op, user_annotation and runtime call, sorted by (ts, -dur)."""
    cpu_ops: list[Op]
    user_annotations: list[Op]
    launches: list[Op]
    python_functions: list[Event]
    gpu_events: list[GpuEvent]
    """Kernels, memcpys and memsets, sorted by ts."""
    gpu_annotations: list[Event]
    steps: list[Step]
    device_properties: list[dict[str, Any]]
    base_time_ns: int | None
    warnings: list[str]


class _TraceView(msgspec.Struct, rename="camel"):
    trace_events: list[Event]
    device_properties: list[dict[str, Any]] = []
    base_time_nanoseconds: int | None = None


class _LooseTraceView(msgspec.Struct, rename="camel"):
    trace_events: list[msgspec.Raw]
    device_properties: msgspec.Raw = _NO_RAW
    base_time_nanoseconds: msgspec.Raw = _NO_RAW


_VIEW_DECODER = msgspec.json.Decoder(_TraceView)
_LOOSE_DECODER = msgspec.json.Decoder(_LooseTraceView)
_EVENT_DECODER = msgspec.json.Decoder(Event)


def load_trace(path: str | Path) -> Trace:
    """Read a Kineto trace from a ``.json`` or gzip file (detected by its magic bytes)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc.strerror or exc}") from None
    return decode_trace(data)


def decode_trace(data: bytes) -> Trace:
    """Build a Trace from the bytes of a Kineto trace, plain JSON or gzip."""
    view, warnings = _decode_view(_decompress(data))
    if not view.trace_events:
        raise TraceError("the trace has no events")
    return _build(view, warnings)


def _decompress(data: bytes) -> bytes:
    if not data:
        raise TraceError("the trace file is empty")
    if not data.startswith(_GZIP_MAGIC):
        return data
    try:
        data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceError(f"corrupt or truncated gzip: {exc}") from None
    if not data:
        raise TraceError("the trace file is empty")
    return data


def _decode_view(data: bytes) -> tuple[_TraceView, Counter[str]]:
    """Decode fast when the trace is well formed, else event by event, skipping bad ones."""
    try:
        return _VIEW_DECODER.decode(data), Counter()
    except msgspec.MsgspecError:
        return _decode_loose(data)


def _decode_loose(data: bytes) -> tuple[_TraceView, Counter[str]]:
    try:
        loose = _LOOSE_DECODER.decode(data)
        raw_events: list[object] = list(loose.trace_events)
        top = {
            "deviceProperties": _decode_any(loose.device_properties),
            "baseTimeNanoseconds": _decode_any(loose.base_time_nanoseconds),
        }
    except msgspec.ValidationError:
        raise TraceError("not a Kineto trace: no traceEvents list") from None
    except msgspec.DecodeError:
        top, raw_events = _decode_nonstandard(data)
    warnings: Counter[str] = Counter()
    events: list[Event] = []
    for raw in raw_events:
        try:
            events.append(_decode_event(raw))
        except (msgspec.MsgspecError, OverflowError, RecursionError, TypeError, ValueError):
            warnings["skipped malformed events"] += 1
    properties = top.get("deviceProperties")
    if not _is_list_of_dicts(properties):
        properties = []
        warnings["ignored malformed deviceProperties"] += 1
    base = top.get("baseTimeNanoseconds")
    base = base if isinstance(base, int) and not isinstance(base, bool) else None
    return _TraceView(events, properties, base), warnings


def _decode_any(raw: msgspec.Raw) -> object:
    return msgspec.json.decode(raw) if raw is not _NO_RAW else None


def _decode_event(raw: object) -> Event:
    """One event from its JSON (a Raw) or from the standard library's parse of it."""
    if not isinstance(raw, msgspec.Raw):
        raw = msgspec.json.encode(raw)
    return _EVENT_DECODER.decode(raw)


def _is_list_of_dicts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(d, dict) for d in value)  # pyright: ignore[reportUnknownVariableType]


def _decode_nonstandard(data: bytes) -> tuple[dict[str, object], list[object]]:
    """Parse with the standard library, which also takes the NaN and Infinity that some
    writers emit; events are later re-encoded (NaN becomes null) and decoded one by one."""
    try:
        top: object = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise TraceError(f"not valid JSON: {exc}") from None
    if not isinstance(top, dict) or not isinstance(top.get("traceEvents"), list):  # pyright: ignore[reportUnknownMemberType]
        raise TraceError("not a Kineto trace: no traceEvents list")
    fields: dict[str, object] = top  # pyright: ignore[reportUnknownVariableType]
    events: list[object] = fields["traceEvents"]  # pyright: ignore[reportAssignmentType]
    return fields, events


def _build(view: _TraceView, warnings: Counter[str]) -> Trace:
    buckets = _bucket_by_cat(view.trace_events)
    cpu_ops = _host_ops(buckets.get(CPU_OP, []), warnings)
    annotations = _host_ops(buckets.get(USER_ANNOTATION, []), warnings)
    runtime: list[Op] = []
    for cat in RUNTIME_CATS:
        runtime += _runtime_calls(buckets.get(cat, []), warnings)
    ops = _sorted_by_start(cpu_ops + annotations + runtime)
    _nest(ops)
    gpu: list[GpuEvent] = []
    for cat in GPU_CATS:
        gpu += _gpu_events(buckets.get(cat, []), warnings)
    gpu.sort(key=attrgetter("ts"))
    _link(ops, gpu)
    cpu_ops = [op for op in ops if op.cat == CPU_OP]
    annotations = [op for op in ops if op.cat == USER_ANNOTATION]
    return Trace(
        ops=ops,
        cpu_ops=cpu_ops,
        user_annotations=annotations,
        launches=[op for op in ops if op.cat in RUNTIME_CATS],
        python_functions=_spans(buckets.get(PYTHON_FUNCTION, []), warnings),
        gpu_events=gpu,
        gpu_annotations=_spans(buckets.get(GPU_USER_ANNOTATION, []), warnings),
        steps=_steps(annotations, cpu_ops),
        device_properties=view.device_properties,
        base_time_ns=view.base_time_nanoseconds,
        warnings=[f"{reason}: {n}" for reason, n in sorted(warnings.items())],
    )


def _bucket_by_cat(events: list[Event]) -> dict[str, list[Event]]:
    buckets: dict[str, list[Event]] = {}
    for event in events:
        bucket = buckets.get(event.cat)
        if bucket is None:
            bucket = buckets[event.cat] = []
        bucket.append(event)
    return buckets


def _is_span(event: Event) -> bool:
    return (
        event.ph == "X"
        and event.name != ""
        and -_LIMIT_US < event.ts < _LIMIT_US
        and 0.0 <= event.dur < _LIMIT_US
    )


def _spans(events: list[Event], warnings: Counter[str]) -> list[Event]:
    """The events that are complete spans with a name and sane ts/dur; counts the others."""
    good = [e for e in events if _is_span(e)]
    if len(good) != len(events):
        warnings[f"skipped {events[0].cat} events with missing or bad ph/name/ts/dur"] += (
            len(events) - len(good)
        )
    return good


def _host_ops(events: list[Event], warnings: Counter[str]) -> list[Op]:
    return [
        Op(e.cat, e.name, e.pid, e.tid, e.ts, e.dur, e.args)
        for e in _spans(events, warnings)
        if e.name not in HIDDEN_OPS
    ]


def _runtime_calls(events: list[Event], warnings: Counter[str]) -> list[Op]:
    calls: list[Op] = []
    for e in _spans(events, warnings):
        try:
            correlation = _RUNTIME_ARGS_DECODER.decode(e.args).correlation
        except msgspec.MsgspecError:
            warnings[f"ignored malformed args of {e.cat} events"] += 1
            correlation = -1
        calls.append(Op(e.cat, e.name, e.pid, e.tid, e.ts, e.dur, e.args, correlation))
    return calls


def _gpu_events(events: list[Event], warnings: Counter[str]) -> list[GpuEvent]:
    out: list[GpuEvent] = []
    for e in _spans(events, warnings):
        try:
            a = _GPU_ARGS_DECODER.decode(e.args)
        except msgspec.MsgspecError:
            warnings[f"ignored malformed args of {e.cat} events"] += 1
            a = _GpuArgs()
        device = a.device if a.device >= 0 or not isinstance(e.pid, int) else e.pid
        stream = a.stream if a.stream >= 0 or not isinstance(e.tid, int) else e.tid
        out.append(
            GpuEvent(
                e.cat, e.name, e.ts, e.dur, device, stream, a.correlation, a.external_id,
                a.bytes, e.args,
            )
        )
    return out


def _sorted_by_start(ops: list[Op]) -> list[Op]:
    """Sort by (ts, -dur), the order torch nests in; set each op's index."""
    ops.sort(key=attrgetter("dur"), reverse=True)
    ops.sort(key=attrgetter("ts"))
    for i, op in enumerate(ops):
        op.index = i
    return ops


def _nest(ops: list[Op]) -> None:
    """Set parent/children from time containment on each thread, as torch's
    ``EventList._populate_cpu_children`` does, in whole nanoseconds; no recursion."""
    if not ops:
        return
    t0 = ops[0].ts
    stacks: dict[tuple[int | str, int | str], list[tuple[int, Op]]] = {}
    for op in ops:
        start = round((op.ts - t0) * 1000.0)
        end = start + round(op.dur * 1000.0)
        thread = (op.pid, op.tid)
        stack = stacks.get(thread)
        if stack is None:
            stack = stacks[thread] = []
        while stack:
            parent_end, parent = stack[-1]
            if start >= parent_end or end > parent_end:
                stack.pop()
            else:
                op.parent = parent.index
                parent.children.append(op.index)
                break
        stack.append((end, op))


def _link(ops: list[Op], gpu_events: list[GpuEvent]) -> None:
    """Link each GPU event to its launch (by correlation) and to its op: the innermost op
    around the launch when its External id agrees, else the op holding that External id."""
    launches = {op.correlation: op for op in ops if op.correlation >= 0}
    known_ids: dict[int, int] = {}  # op index -> External id, for ops checked so far
    by_external_id: dict[int, int] | None = None
    for event in gpu_events:
        launch = launches.get(event.correlation) if event.correlation >= 0 else None
        owner = -1
        if launch is not None:
            event.launch = launch.index
            owner = _launching_op(ops, launch)
        if event.external_id >= 0 and owner >= 0:
            if owner not in known_ids:
                known_ids[owner] = ops[owner].external_id()
            if known_ids[owner] == event.external_id:
                event.op = owner
                continue
        if event.external_id >= 0:
            if by_external_id is None:
                by_external_id = _ops_by_external_id(ops)
            owner = by_external_id.get(event.external_id, owner)
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
