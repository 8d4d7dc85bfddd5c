"""The events of a Kineto trace, decoded a piece at a time, filed and linked into a Trace.

Each piece's events are filed by category as they come (names shared, only the args that
linking or analyses read kept, as copies: the pieces are freed); then host spans are nested
per thread and GPU work linked to its launch and to the op that made it. A piece msgspec
rejects is decoded again event by event, and the bad events are skipped and counted in
``Trace.warnings``. Where several processes read a file (``trace_load``), each files its
pieces and sends what it filed to the parent's Builder.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from itertools import compress, groupby
from operator import attrgetter, eq
from sys import intern
from typing import Any, TypeVar, Union, cast

import msgspec

from kernelscope.analysis.trace_model import (
    CPU_OP,
    GPU_CATS,
    GPU_USER_ANNOTATION,
    HIDDEN_OPS,
    NO_RAW,
    OTHER_PHASE_EVENTS,
    PYTHON_FUNCTION,
    RUNTIME_CATS,
    STEP_PREFIX,
    USER_ANNOTATION,
    AnyEvent,
    Event,
    FrameArrays,
    FrameColumns,
    GpuEvent,
    KinetoEvent,
    Op,
    Step,
    Trace,
    TraceError,
)
from kernelscope.analysis.trace_stream import Chunk, EventPieces
from kernelscope.analysis.user_code import is_user_frame

__all__ = ["Builder"]

_NO_ARGS = b"{}"
_TS = attrgetter("ts")
_DUR = attrgetter("dur")
_INDEX = attrgetter("index")
_CAT = attrgetter("cat")
_NAME = attrgetter("name")


class _RuntimeArgs(msgspec.Struct, gc=False):
    correlation: int = -1


class _GpuArgs(msgspec.Struct, gc=False):
    correlation: int = -1
    external_id: int = msgspec.field(default=-1, name="External id")
    device: int = -1
    stream: int = -1
    bytes: int = 0


#: (decoder of many events' args, decoder of one's, the args when malformed)
_RUNTIME_ARGS = (
    msgspec.json.Decoder(list[_RuntimeArgs]),
    msgspec.json.Decoder(_RuntimeArgs),
    _RuntimeArgs(),
)
_GPU_ARGS = (msgspec.json.Decoder(list[_GpuArgs]), msgspec.json.Decoder(_GpuArgs), _GpuArgs())


class Distributed(msgspec.Struct):
    """Kineto's ``distributedInfo``: the process group the trace's process was in."""

    backend: str | None = None
    rank: int | None = None
    world_size: int | None = None


_DISTRIBUTED = msgspec.json.Decoder(Distributed)


def decode_each(raw_events: Iterable[object], warnings: Counter[str]) -> list[AnyEvent]:
    """The events one by one; the bad ones skipped and counted in ``warnings``."""
    events: list[AnyEvent] = []
    for raw in raw_events:
        try:
            events.append(_decode_event(raw))
        except (msgspec.MsgspecError, OverflowError, RecursionError, TypeError, ValueError):
            warnings["skipped events with a bad or missing ph, name, ts or dur"] += 1
    return events


def _decode_event(raw: object) -> AnyEvent:
    """One event from its JSON (a Raw) or from the standard library's parse of it."""
    if not isinstance(raw, msgspec.Raw):
        raw = msgspec.json.encode(raw)
    return _EVENT_DECODER.decode(raw)


_KINETO_EVENTS: msgspec.json.Decoder[list[AnyEvent]] = msgspec.json.Decoder(
    list[Union[(KinetoEvent, *OTHER_PHASE_EVENTS)]]  # pyright: ignore[reportInvalidTypeForm]
)
_EVENTS = msgspec.json.Decoder(list[AnyEvent])
_RAW_EVENTS = msgspec.json.Decoder(list[msgspec.Raw])
_PROPERTIES = msgspec.json.Decoder(list[dict[str, Any]])
_EVENT_DECODER = msgspec.json.Decoder(AnyEvent)


class Builder:
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
        distributed: Distributed | None = None
        if "distributedInfo" in top:
            try:
                distributed = _DISTRIBUTED.decode(top["distributedInfo"])
            except msgspec.MsgspecError:
                self.warnings["ignored a malformed distributedInfo"] += 1
        return self.finish(properties, base, distributed)

    def decode(self, piece: memoryview) -> list[AnyEvent]:
        """Events of one piece; bad events skipped and counted. DecodeError on bad JSON."""
        for decoder in (_KINETO_EVENTS, _EVENTS):
            try:
                return decoder.decode(piece)
            except msgspec.ValidationError:
                continue
        return decode_each(_RAW_EVENTS.decode(piece), self.warnings)

    def add(self, events: list[AnyEvent]) -> None:
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
        distributed: Distributed | None = None,
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
    frames: FrameArrays
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
        e.args = NO_RAW
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
