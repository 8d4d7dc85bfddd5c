"""Reading a Kineto trace from a file (``load_trace``) or bytes (``decode_trace``).

The file is decoded a piece at a time (``trace_stream``), by several processes when it is
big (``trace_segments``), into view Structs (``args`` left undecoded, spans validated by
msgspec, Kineto's categories decoded as constants) that ``trace_build`` files and links. Of
the args, only what linking needs is decoded. A file not laid out as Kineto writes it is read
whole, and what is wrong with it said; a piece msgspec rejects is read again event by event,
and the bad events are skipped and counted in ``Trace.warnings``.

Cost (bench/trace_speed.py): see the README; peak memory is bounded by MEMORY_PER_BYTE of
the JSON, and a trace that needs more than the machine has is refused with its sizes.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections import Counter
from collections.abc import Generator
from contextlib import closing
from pathlib import Path
from typing import Any, Union, cast

import msgspec

from kernelscope.analysis.memory_budget import OutOfMemory, available_bytes, require, rss_bytes
from kernelscope.analysis.trace_build import Builder, Distributed, decode_each
from kernelscope.analysis.trace_model import (
    NO_RAW,
    OTHER_PHASE_EVENTS,
    AnyEvent,
    KinetoEvent,
    Trace,
    TraceError,
)
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
from kernelscope.units import fmt_bytes

__all__ = ["decode_trace", "load_trace"]


class _TraceView(msgspec.Struct, rename="camel"):
    trace_events: list[AnyEvent]
    device_properties: list[dict[str, Any]] = []
    base_time_nanoseconds: int | None = None
    distributed_info: Distributed | None = None


class _LooseTraceView(msgspec.Struct, rename="camel"):
    trace_events: list[msgspec.Raw]
    device_properties: msgspec.Raw = NO_RAW
    base_time_nanoseconds: msgspec.Raw = NO_RAW
    distributed_info: msgspec.Raw = NO_RAW


_KinetoTraceView: Any = msgspec.defstruct(
    "_KinetoTraceView",
    [("trace_events", list[Union[(KinetoEvent, *OTHER_PHASE_EVENTS)]])],
    bases=(_TraceView,),
)
_KINETO_VIEW_DECODER: msgspec.json.Decoder[_TraceView] = msgspec.json.Decoder(_KinetoTraceView)
_VIEW_DECODER = msgspec.json.Decoder(_TraceView)
_LOOSE_DECODER = msgspec.json.Decoder(_LooseTraceView)


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
        return Builder().stream(file_chunks(path, watch, gzipped=gzipped))
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
    builder = Builder(columnar=True)
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
    builder = Builder(columnar=True)
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
    builder = Builder(columnar=True)
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
        return Builder().stream(iter([Chunk.of(data)]))
    except NotStreamable:
        return _decode_whole(data)


def _decode_whole(data: bytes) -> Trace:
    view, warnings = _decode_view(data)
    builder = Builder()
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
    events = decode_each(raw_events, warnings)
    properties = top.get("deviceProperties")
    if not _is_list_of_dicts(properties):
        if properties is not None:
            warnings["ignored a malformed deviceProperties"] += 1
        properties = []
    base = top.get("baseTimeNanoseconds")
    base = base if isinstance(base, int) and not isinstance(base, bool) else None
    distributed: Distributed | None = None
    if top.get("distributedInfo") is not None:
        try:
            distributed = msgspec.convert(top["distributedInfo"], Distributed)
        except msgspec.ValidationError:
            warnings["ignored a malformed distributedInfo"] += 1
    properties = cast("list[dict[str, Any]]", properties)
    return _TraceView(events, properties, base, distributed), warnings


def _decode_raw(raw: msgspec.Raw) -> object:
    return msgspec.json.decode(raw) if raw is not NO_RAW else None


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
