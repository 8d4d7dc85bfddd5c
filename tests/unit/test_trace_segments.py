"""A big plain trace read by several processes, a byte range each.

Its trace and its analysis must equal what one stream gives, whatever the ranges' size; a
cut that falls inside a string or a nested value, a file not laid out as Kineto writes, or a
range one long event covers must still give the right trace (by the stream, for the first
two). The thresholds are lowered so that a recording of a few MB takes the parallel path.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import msgspec
import pytest

from kernelscope.analysis import trace_load, trace_segments
from kernelscope.analysis.diagnose import analyze
from kernelscope.analysis.trace_build import Builder
from kernelscope.analysis.trace_load import (  # pyright: ignore[reportPrivateUsage]
    _load_pieces,
    _load_segments,
    load_trace,
)
from kernelscope.analysis.trace_model import FrameColumns, Trace
from kernelscope.analysis.trace_stream import file_chunks

from support import REPO_ROOT

FIXTURES = REPO_ROOT / "fixtures"
RAW_EVENTS = msgspec.json.Decoder(list[msgspec.Raw])


@pytest.fixture
def parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files of 64 kB and up read by two processes, in 16 kB ranges."""
    monkeypatch.setattr(trace_segments, "MIN_BYTES", 64 << 10)
    monkeypatch.setattr(trace_segments, "BYTES_PER_PROCESS", 32 << 10)
    monkeypatch.setattr(trace_segments, "MAX_PROCESSES", 2)
    monkeypatch.setattr(trace_segments, "SEGMENT_BYTES", 16 << 10)
    monkeypatch.setattr(trace_load, "processes", _two)


def _two(size: int, gzipped: bool = False) -> int:
    del gzipped
    return 2 if size >= trace_segments.MIN_BYTES else 1


def plain(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_bytes(gzip.decompress((FIXTURES / name / "trace.json.gz").read_bytes()))
    return path


def streamed(path: Path) -> Trace:
    return Builder().stream(file_chunks(path))


def spans(events: object) -> list[tuple[object, ...]]:
    return [(e.name, e.ts, e.dur, e.cat, e.pid, e.tid) for e in events]  # type: ignore[attr-defined]


def assert_same(a: Trace, b: Trace) -> None:
    assert a.ops == b.ops and len(a.ops) > 0
    assert a.gpu_events == b.gpu_events
    assert spans(a.gpu_annotations) == spans(b.gpu_annotations)
    assert spans(a.python_functions) == spans(b.python_functions)
    assert a.frames_seen == b.frames_seen > len(a.python_functions)
    assert (a.steps, a.warnings, a.base_time_ns) == (b.steps, b.warnings, b.base_time_ns)
    assert a.device_properties == b.device_properties


@pytest.mark.usefixtures("parallel")
@pytest.mark.parametrize("name", ["syncs", "resnet50", "two_streams"])
def test_ranges_read_apart_give_the_trace_and_analysis_of_one_stream(
    tmp_path: Path, name: str
) -> None:
    path = plain(tmp_path, name)
    seen: list[int] = []
    read = _load_segments(path, path.stat().st_size, 2, lambda done, _: seen.append(done))
    assert read is not None, "the recording is laid out for ranges"
    assert isinstance(read.python_functions, FrameColumns) or not read.python_functions
    one = streamed(path)
    assert_same(read, one)
    assert analyze(read) == analyze(one)
    assert seen == sorted(seen) and len(seen) > 4
    # load_trace takes the same path at this size
    assert isinstance(load_trace(path).python_functions, type(read.python_functions))


@pytest.mark.usefixtures("parallel")
@pytest.mark.parametrize("name", ["syncs", "resnet50"])
def test_a_gzip_inflated_here_and_decoded_apart_gives_the_trace_of_one_stream(
    tmp_path: Path, name: str
) -> None:
    path = plain(tmp_path, name)
    packed = tmp_path / f"{name}.json.gz"
    packed.write_bytes(gzip.compress(path.read_bytes(), 1))
    chunks = file_chunks(packed, chunk_bytes=16 << 10)
    read = _load_pieces(chunks, 2)
    assert read is not None
    assert isinstance(read.python_functions, FrameColumns) or not read.python_functions
    assert_same(read, streamed(path))
    assert isinstance(load_trace(packed).python_functions, type(read.python_functions))


@pytest.mark.usefixtures("parallel")
def test_frames_around_an_op_are_found_in_columns(tmp_path: Path) -> None:
    path = plain(tmp_path, "syncs")
    read, one = load_trace(path), streamed(path)
    assert isinstance(read.python_functions, FrameColumns)
    for a, b in zip(read.ops[::7], one.ops[::7], strict=True):
        assert spans(read.python_frames(a)) == spans(one.python_frames(b))
    assert any(spans(read.python_frames(op)) for op in read.ops)


def events_and_head(path: Path) -> tuple[bytes, list[bytes], bytes]:
    data = path.read_bytes()
    doc = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
    events = [bytes(e) for e in RAW_EVENTS.decode(doc.pop("traceEvents"))]
    head = msgspec.json.encode(doc)[:-1]
    return head, events, b"}"


def write(path: Path, head: bytes, events: list[bytes]) -> Path:
    path.write_bytes(head + b', "traceEvents": [\n' + b",\n".join(events) + b"\n]}")
    return path


@pytest.mark.usefixtures("parallel")
def test_a_cut_inside_a_string_or_a_nested_value_falls_back_to_the_stream(
    tmp_path: Path,
) -> None:
    head, events, _ = events_and_head(plain(tmp_path, "syncs"))
    tricky = [
        b'{"ph": "X", "cat": "cpu_op", "name": "x}, {y", "pid": 1, "tid": 1, "ts": 1.0, '
        b'"dur": 1.0, "args": {"list": [{"a": 1}, {"b": 2}]}}'
    ] * 4000  # every range's edge lands in one of these
    path = write(tmp_path / "tricky.json", head, events + tricky)
    assert _load_segments(path, path.stat().st_size, 2, lambda *_: None) is None
    trace = load_trace(path)
    assert sum(op.name == "x}, {y" for op in trace.ops) == 4000
    assert_same(trace, streamed(path))
    packed = tmp_path / "tricky.json.gz"
    packed.write_bytes(gzip.compress(path.read_bytes(), 1))
    assert _load_pieces(file_chunks(packed, chunk_bytes=16 << 10), 2) is None
    assert_same(load_trace(packed), trace)


@pytest.mark.usefixtures("parallel")
def test_an_event_longer_than_a_range_leaves_that_range_empty(tmp_path: Path) -> None:
    head, events, _ = events_and_head(plain(tmp_path, "syncs"))
    long_one = (
        b'{"ph": "X", "cat": "cpu_op", "name": "long", "pid": 1, "tid": 1, "ts": 1.0, '
        b'"dur": 1.0, "args": {"pad": "' + b"x" * (100 << 10) + b'"}}'
    )
    path = write(tmp_path / "long.json", head, [*events[:50], long_one, *events[50:]])
    read = _load_segments(path, path.stat().st_size, 2, lambda *_: None)
    assert read is not None
    assert_same(read, streamed(path))
    assert [op.name for op in read.ops].count("long") == 1


@pytest.mark.usefixtures("parallel")
@pytest.mark.parametrize(
    "layout",
    [
        b'{"other": [' + b"1," * 40000 + b'1], "traceEvents": [%s]}',  # events after a big field
        b'{"traceEvents": [%s], "after": {"x": [1, 2]}}',
    ],
)
def test_other_layouts_are_read_right(tmp_path: Path, layout: bytes) -> None:
    _, events, _ = events_and_head(plain(tmp_path, "syncs"))
    path = tmp_path / "other.json"
    path.write_bytes(layout % b",".join(events))
    assert_same(load_trace(path), streamed(path))


def test_small_files_and_one_cpu_read_in_one_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    assert trace_segments.processes(trace_segments.MIN_BYTES - 1) == 1
    monkeypatch.setattr(trace_segments.os, "sched_getaffinity", lambda _: {0})
    assert trace_segments.processes(8 << 30) == 1
    monkeypatch.setattr(trace_segments.os, "sched_getaffinity", lambda _: set(range(64)))
    assert trace_segments.processes(8 << 30) == trace_segments.MAX_PROCESSES
    assert trace_segments.processes(trace_segments.MIN_BYTES) == 2
    assert trace_segments.processes(trace_segments.MIN_BYTES, gzipped=True) == 1
    assert trace_segments.processes(trace_segments.MIN_GZIP_BYTES, gzipped=True) == 8


def test_a_file_shorter_than_its_size_said_is_not_laid_out(tmp_path: Path) -> None:
    path = tmp_path / "short.json"
    path.write_bytes(b'{"a": 1}' + b" " * 24)
    assert trace_segments.layout(path, 100 << 20) is None  # read until it ends, not forever


def _exit_at_once(segment: trace_segments.Segment) -> bytes | None:
    os._exit(9)  # a child killed, as the OOM killer would


@pytest.mark.usefixtures("parallel")
def test_processes_that_cannot_run_or_die_leave_it_to_one_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = plain(tmp_path, "syncs")
    one = streamed(path)
    monkeypatch.setattr(trace_load, "_filed_segment", _exit_at_once)
    with pytest.raises(trace_segments.ProcessesUnavailable):
        _load_segments(path, path.stat().st_size, 2, lambda *_: None)
    assert_same(load_trace(path), one)

    def no_semaphores(*_: object, **__: object) -> None:
        raise NotImplementedError("This platform lacks a functioning sem_open implementation")

    monkeypatch.setattr(trace_segments, "ProcessPoolExecutor", no_semaphores)
    assert_same(load_trace(path), one)


def test_a_cgroups_cpu_quota_caps_the_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trace_segments.os, "sched_getaffinity", lambda _: set(range(64)))
    quota = tmp_path / "cpu.max"
    monkeypatch.setattr(trace_segments, "_CPU_MAX", quota)
    quota.write_text("250000 100000\n")
    assert trace_segments.processes(8 << 30) == 3
    quota.write_text("max 100000\n")
    assert trace_segments.processes(8 << 30) == trace_segments.MAX_PROCESSES
