"""The Kineto trace model: decoding, nesting, linking, steps and bad input.

Each test builds a tiny trace as a dict, written to a temporary file as plain or gzip JSON.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from kernelscope.analysis import trace_load
from kernelscope.analysis.trace_load import decode_trace, load_trace
from kernelscope.analysis.trace_model import Op, Trace, TraceError

PID = 100
TID = 100


def span(cat: str, name: str, ts: float, dur: float, tid: int = TID, **args: Any) -> dict[str, Any]:
    """One complete ("X") event; keyword args go to ``args``, "_" read as " " in their names."""
    event: dict[str, Any] = {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": tid}
    event |= {"ts": ts, "dur": dur}
    event["args"] = {k.replace("_", " "): v for k, v in args.items()}
    return event


def kernel(
    name: str, ts: float, dur: float, correlation: int, ext: int, cat: str = "kernel", **args: Any
) -> dict[str, Any]:
    """A GPU event on device 0, stream 7; ``args`` override the usual ones."""
    event = span(cat, name, ts, dur) | {"pid": 0, "tid": 7}
    event["args"] = {"External id": ext, "device": 0, "stream": 7, "correlation": correlation}
    event["args"] |= args
    return event


def trace_doc(*events: dict[str, Any], **top: Any) -> dict[str, Any]:
    meta = {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "python"}}
    return {"schemaVersion": 1, "traceEvents": [meta, *events], **top}


def write(path: Path, doc: dict[str, Any], compress: bool = False) -> Path:
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def by_name(trace: Trace, name: str) -> Op:
    return next(op for op in trace.ops if op.name == name)


# A step with a call, an aten op launching a kernel through the runtime API, one launching
# through the driver API (cuBLASLt on Hopper), a copy and a memset, plus python frames.
CUDA_DOC = trace_doc(
    span("user_annotation", "ProfilerStep#3", 0.0, 100.0, External_id=1),
    span("user_annotation", "ks:call", 1.0, 60.0, External_id=2),
    span(
        "cpu_op",
        "aten::mm",
        2.0,
        20.0,
        External_id=3,
        Input_Dims=[[4, 8], [8, 2]],
        Input_type=["float", "float"],
    ),
    span("cuda_driver", "cuLaunchKernelEx", 10.0, 5.0, External_id=3, correlation=11),
    span("cpu_op", "aten::add", 30.0, 10.0, External_id=4),
    span("cuda_runtime", "cudaLaunchKernel", 32.0, 4.0, External_id=4, correlation=12),
    span("cpu_op", "aten::copy_", 45.0, 10.0, External_id=5),
    span("cuda_runtime", "cudaMemcpyAsync", 46.0, 3.0, External_id=5, correlation=13),
    span("cuda_runtime", "cudaMemsetAsync", 50.0, 2.0, External_id=5, correlation=14),
    span("python_function", "mod.py(3): f", 0.5, 70.0, Python_id=1),
    kernel("nvjet_sm90_gemm", 16.0, 7.5, correlation=11, ext=3),
    kernel("elementwise_add", 37.0, 1.25, correlation=12, ext=4),
    kernel("Memcpy HtoD (Pageable -> Device)", 50.0, 0.5, 13, 5, cat="gpu_memcpy", bytes=4000),
    kernel("Memset (Device)", 53.0, 0.25, 14, 5, cat="gpu_memset", bytes=4),
    span("gpu_user_annotation", "ks:call", 16.0, 38.0, External_id=2) | {"pid": 0, "tid": 7},
    {"ph": "s", "id": 11, "pid": PID, "tid": TID, "ts": 10.0, "cat": "ac2g", "name": "ac2g"},
    {"ph": "f", "id": 11, "pid": 0, "tid": 7, "ts": 16.0, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    deviceProperties=[{"id": 0, "name": "NVIDIA H200", "numSms": 132}],
    baseTimeNanoseconds=1790857026000000000,
)


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_cuda_trace_is_sorted_into_categories(tmp_path: Path, compress: bool) -> None:
    trace = load_trace(write(tmp_path / "t.json", CUDA_DOC, compress))
    assert [op.name for op in trace.cpu_ops] == ["aten::mm", "aten::add", "aten::copy_"]
    assert [op.name for op in trace.user_annotations] == ["ProfilerStep#3", "ks:call"]
    assert [op.name for op in trace.launches] == [
        "cuLaunchKernelEx", "cudaLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync"
    ]  # fmt: skip
    assert [e.name for e in trace.python_functions] == ["mod.py(3): f"]
    assert [g.cat for g in trace.gpu_events] == ["kernel", "kernel", "gpu_memcpy", "gpu_memset"]
    assert [a.name for a in trace.gpu_annotations] == ["ks:call"]
    assert len(trace.ops) == 9
    assert trace.device_properties[0]["name"] == "NVIDIA H200"
    assert trace.base_time_ns == 1790857026000000000
    assert trace.warnings == []


def test_gzip_is_told_by_magic_bytes_not_by_name(tmp_path: Path) -> None:
    zipped = load_trace(write(tmp_path / "looks_plain.json", CUDA_DOC, compress=True))
    plain = load_trace(write(tmp_path / "looks_zipped.json.gz", CUDA_DOC))
    assert len(zipped.ops) == len(plain.ops) == 9


def test_launches_link_gpu_events_to_their_ops(tmp_path: Path) -> None:
    trace = load_trace(write(tmp_path / "t.json", CUDA_DOC))
    linked = {g.name: (trace.ops[g.launch].name, trace.ops[g.op].name) for g in trace.gpu_events}
    assert linked == {
        "nvjet_sm90_gemm": ("cuLaunchKernelEx", "aten::mm"),
        "elementwise_add": ("cudaLaunchKernel", "aten::add"),
        "Memcpy HtoD (Pageable -> Device)": ("cudaMemcpyAsync", "aten::copy_"),
        "Memset (Device)": ("cudaMemsetAsync", "aten::copy_"),
    }
    gemm = trace.gpu_events[0]
    assert (gemm.device, gemm.stream, gemm.correlation, gemm.external_id) == (0, 7, 11, 3)
    assert trace.gpu_events[2].bytes == 4000


def test_gpu_event_without_launch_links_by_external_id() -> None:
    doc = trace_doc(
        span("cpu_op", "aten::mm", 0.0, 10.0, External_id=7),
        kernel("gemm", 12.0, 3.0, correlation=99, ext=7),
    )
    trace = decode_trace(json.dumps(doc).encode())
    assert trace.gpu_events[0].launch == -1
    assert trace.ops[trace.gpu_events[0].op].name == "aten::mm"


def test_launch_that_straddles_an_op_links_by_external_id() -> None:
    # Clock skew: the launch starts inside aten::mm but ends after it.
    doc = trace_doc(
        span("user_annotation", "outer", 0.0, 100.0, External_id=1),
        span("cpu_op", "aten::mm", 10.0, 10.0, External_id=2),
        span("cuda_runtime", "cudaLaunchKernel", 15.0, 10.0, External_id=2, correlation=5),
        kernel("gemm", 30.0, 3.0, correlation=5, ext=2),
    )
    trace = decode_trace(json.dumps(doc).encode())
    assert trace.ops[trace.gpu_events[0].launch].parent == by_name(trace, "outer").index
    assert trace.ops[trace.gpu_events[0].op].name == "aten::mm"


def test_ops_nest_per_thread_with_self_time() -> None:
    doc = trace_doc(
        span("user_annotation", "step", 0.0, 100.0),
        span("cpu_op", "aten::linear", 10.0, 50.0),
        span("cpu_op", "aten::t", 12.0, 5.0),
        span("cpu_op", "aten::addmm", 20.0, 30.0),
        span("cuda_runtime", "cudaLaunchKernel", 25.0, 4.0, correlation=1),
        span("cpu_op", "aten::relu", 70.0, 10.0),
        span("cpu_op", "other_thread", 15.0, 200.0, tid=200),
    )
    trace = decode_trace(json.dumps(doc).encode())
    step, linear, addmm = (
        by_name(trace, "step"),
        by_name(trace, "aten::linear"),
        by_name(trace, "aten::addmm"),
    )
    assert [c.name for c in trace.children(step)] == ["aten::linear", "aten::relu"]
    assert [c.name for c in trace.children(linear)] == ["aten::t", "aten::addmm"]
    assert [c.name for c in trace.children(addmm)] == ["cudaLaunchKernel"]
    assert by_name(trace, "other_thread").parent == -1
    assert step.parent == -1
    assert step.self_dur == pytest.approx(40.0)
    assert linear.self_dur == pytest.approx(15.0)
    assert addmm.self_dur == pytest.approx(26.0)
    assert [op.index for op in trace.ops] == list(range(len(trace.ops)))


def test_equal_starts_nest_the_longer_outside() -> None:
    doc = trace_doc(
        span("cpu_op", "inner", 10.0, 5.0),
        span("cpu_op", "outer", 10.0, 20.0),
        span("cpu_op", "late", 16.0, 1.0),
    )
    trace = decode_trace(json.dumps(doc).encode())
    assert [op.name for op in trace.ops] == ["outer", "inner", "late"]
    assert by_name(trace, "inner").parent == by_name(trace, "outer").index
    assert by_name(trace, "late").parent == by_name(trace, "outer").index


def test_partial_overlap_is_not_nesting() -> None:
    doc = trace_doc(
        span("cpu_op", "a", 0.0, 10.0),
        span("cpu_op", "overlaps_a", 5.0, 10.0),
        span("cpu_op", "starts_at_end_of_a", 10.0, 1.0),
    )
    trace = decode_trace(json.dumps(doc).encode())
    assert by_name(trace, "overlaps_a").parent == -1
    assert by_name(trace, "starts_at_end_of_a").parent == by_name(trace, "overlaps_a").index


def test_nanosecond_boundaries_are_exact_at_large_timestamps() -> None:
    # Kineto timestamps are ~5e12 µs: a child ending on its parent's end must still nest.
    base = 5097980256747.9
    doc = trace_doc(
        span("cpu_op", "parent", base, 35.305),
        span("cpu_op", "child", round(base + 11.222, 3), 24.083),
        span("cpu_op", "after", round(base + 35.305, 3), 1.0),
    )
    trace = decode_trace(json.dumps(doc).encode())
    assert by_name(trace, "child").parent == by_name(trace, "parent").index
    assert by_name(trace, "after").parent == -1


def test_deep_nesting_does_not_recurse() -> None:
    depth = 50_000
    events = [span("cpu_op", f"op{i}", float(i), float(2 * (depth - i))) for i in range(depth)]
    trace = decode_trace(json.dumps(trace_doc(*events)).encode())
    assert trace.ops[-1].parent == depth - 2
    assert trace.ops[0].self_dur == pytest.approx(2.0)


def test_steps_are_profiler_steps_in_time_order() -> None:
    doc = trace_doc(
        span("user_annotation", "ProfilerStep#5", 50.0, 40.0),
        span("user_annotation", "ProfilerStep#4", 0.0, 45.0),
        span("user_annotation", "ks:call", 1.0, 10.0),
    )
    trace = decode_trace(json.dumps(doc).encode())
    assert [(s.name, s.ts, s.end) for s in trace.steps] == [
        ("ProfilerStep#4", 0.0, 45.0),
        ("ProfilerStep#5", 50.0, 90.0),
    ]


def test_without_profiler_steps_top_level_annotations_are_steps() -> None:
    doc = trace_doc(
        span("user_annotation", "a", 0.0, 10.0),
        span("user_annotation", "nested", 1.0, 2.0),
        span("user_annotation", "b", 20.0, 10.0),
        span("cpu_op", "aten::add", 40.0, 1.0),
    )
    trace = decode_trace(json.dumps(doc).encode())
    assert [s.name for s in trace.steps] == ["a", "b"]


def test_without_annotations_one_step_covers_the_cpu_ops() -> None:
    doc = trace_doc(span("cpu_op", "aten::add", 40.0, 1.0), span("cpu_op", "aten::mul", 5.0, 2.0))
    trace = decode_trace(json.dumps(doc).encode())
    assert [(s.ts, s.end) for s in trace.steps] == [(5.0, 41.0)]


def test_without_host_ops_there_are_no_steps() -> None:
    trace = decode_trace(json.dumps(trace_doc(span("python_function", "f", 0.0, 1.0))).encode())
    assert trace.steps == []
    assert trace.ops == []


def test_op_args_are_decoded_on_demand() -> None:
    trace = load_trace_from(CUDA_DOC)
    mm = by_name(trace, "aten::mm")
    assert mm.inputs().dims == [[4, 8], [8, 2]]
    assert mm.inputs().types == ["float", "float"]
    assert mm.external_id() == 3
    assert by_name(trace, "ks:call").inputs().dims == []
    assert by_name(trace, "cudaLaunchKernel").correlation == 12


def test_ops_torch_hides_are_left_out() -> None:
    doc = trace_doc(
        span("cpu_op", "aten::add", 0.0, 10.0),
        span("cpu_op", "aten::is_leaf", 1.0, 1.0),
        span("cpu_op", "profiler::_record_function_enter_new", 3.0, 1.0),
    )
    assert [op.name for op in load_trace_from(doc).ops] == ["aten::add"]


def load_trace_from(doc: dict[str, Any]) -> Trace:
    return decode_trace(json.dumps(doc).encode())


BAD_FILES: dict[str, bytes] = {
    "empty": b"",
    "not json": b"hello world",
    "truncated json": json.dumps(CUDA_DOC).encode()[:300],
    "truncated gzip": gzip.compress(json.dumps(CUDA_DOC).encode())[:100],
    "gzip of nothing": gzip.compress(b""),
    "gzip of garbage": gzip.compress(b"\x00\xff" * 10),
    "bad gzip header": b"\x1f\x8b" + b"\x00" * 30,
    "not kineto": json.dumps({"hello": 1}).encode(),
    "events not a list": json.dumps({"traceEvents": {"a": 1}}).encode(),
    "top level list": json.dumps([{"ph": "X"}]).encode(),
    "no events": json.dumps({"traceEvents": []}).encode(),
    "no readable events": json.dumps({"traceEvents": [{"ph": "X", "dur": -1}]}).encode(),
    "not utf-8": b'{"traceEvents": ["\xff\xfe"]}',
    "deep json": b'{"traceEvents": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}",
}


@pytest.mark.parametrize("data", BAD_FILES.values(), ids=BAD_FILES.keys())
def test_bad_input_raises_a_one_line_trace_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(data)
    with pytest.raises(TraceError) as error:
        load_trace(path)
    assert str(error.value) and "\n" not in str(error.value)


def test_missing_file_raises_trace_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="cannot read"):
        load_trace(tmp_path / "nope.json")


def test_bad_events_are_skipped_and_counted() -> None:
    good = span("cpu_op", "aten::add", 0.0, 10.0)
    bad = [
        {k: v for k, v in good.items() if k != "dur"},
        {k: v for k, v in good.items() if k != "name"},
        {k: v for k, v in good.items() if k != "ph"},
        good | {"dur": -1.0},
        good | {"ts": "soon"},
        good | {"pid": [1]},
        good | {"ph": "?"},
        "not an event",
    ]
    data = json.dumps(trace_doc(good, *bad, deviceProperties="H200")).encode()
    trace = decode_trace(data)
    assert [op.name for op in trace.ops] == ["aten::add"]
    assert trace.warnings == [
        "ignored a malformed deviceProperties: 1",
        "skipped events with a bad or missing ph, name, ts or dur: 8",
    ]


def test_nan_and_infinity_are_skipped_not_fatal() -> None:
    good = span("cpu_op", "aten::add", 0.0, 10.0)
    doc = trace_doc(good, good | {"dur": float("nan")}, good | {"ts": float("inf")})
    trace = decode_trace(json.dumps(doc).encode())  # the standard library writes NaN
    assert len(trace.ops) == 1
    assert trace.warnings == ["skipped events with a bad or missing ph, name, ts or dur: 2"]


def test_bad_args_are_counted_and_linking_goes_on() -> None:
    doc = trace_doc(
        span("cpu_op", "aten::mm", 0.0, 10.0, External_id=3),
        span("cuda_runtime", "cudaLaunchKernel", 2.0, 1.0, correlation="x"),
        kernel("gemm", 12.0, 3.0, correlation=11, ext=3, device="gpu0"),
    )
    trace = load_trace_from(doc)
    assert trace.gpu_events[0].op == -1
    assert trace.warnings == [
        "ignored malformed args of cuda_runtime events: 1",
        "ignored malformed args of kernel events: 1",
    ]


def test_mangled_traces_raise_only_trace_error() -> None:
    data = json.dumps(CUDA_DOC).encode()
    rng = random.Random(0)
    for _ in range(300):
        mangled = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            mangled[rng.randrange(len(mangled))] = rng.choice(b'{}[]",:0123456789-.eE ntfX')
        cut = bytes(mangled[: rng.randint(len(data) // 2, len(data))])
        for blob in (cut, bytes(mangled), gzip.compress(bytes(mangled))[: rng.randint(10, 400)]):
            with contextlib.suppress(TraceError):
                decode_trace(blob)


def test_categories_kineto_does_not_write_are_read_too() -> None:
    doc = trace_doc(
        span("cpu_op", "aten::add", 0.0, 10.0),
        span("my_tool_range", "phase 1", 0.0, 20.0),
        span("python_function", "mod.py(3): f", 0.0, 30.0),
    )
    trace = load_trace_from(doc)
    assert [op.name for op in trace.ops] == ["aten::add"]
    assert [f.name for f in trace.python_functions] == ["mod.py(3): f"]
    assert trace.warnings == []


def test_ops_overlapping_a_window() -> None:
    doc = trace_doc(
        span("user_annotation", "step", 0.0, 100.0),
        span("cpu_op", "aten::linear", 10.0, 50.0),
        span("cpu_op", "aten::t", 12.0, 5.0),
        span("cpu_op", "aten::addmm", 20.0, 30.0),
        span("cuda_runtime", "cudaLaunchKernel", 25.0, 4.0, correlation=1),
        span("cpu_op", "aten::relu", 70.0, 10.0),
        span("cpu_op", "other_thread", 15.0, 200.0, tid=200),
        span("cpu_op", "later", 300.0, 1.0, tid=200),
    )
    trace = load_trace_from(doc)

    def names(start: float, end: float) -> list[str]:
        return [op.name for op in trace.ops_overlapping(start, end)]

    assert names(30.0, 72.0) == [
        "step",
        "aten::linear",
        "other_thread",
        "aten::addmm",
        "aten::relu",
    ]
    assert names(18.0, 19.0) == ["step", "aten::linear", "other_thread"]
    assert names(100.0, 250.0) == ["other_thread"]
    assert names(500.0, 600.0) == []
    assert names(-10.0, 0.5) == ["step"]
    # the same as a scan of every op
    for start, end in [(0.0, 1.0), (16.0, 26.0), (59.0, 301.0), (80.0, 80.5)]:
        scan = [op.name for op in trace.ops if op.ts < end and op.end > start]
        assert names(start, end) == scan


def test_python_frames_around_an_op_innermost_first() -> None:
    base = 5097980256747.9  # Kineto-sized timestamps: a frame ending with the op still holds it
    doc = trace_doc(
        span("python_function", "threading.py(1030): _bootstrap", base, 100.0),
        span("python_function", "model.py(10): forward", round(base + 1.0, 3), 50.0),
        span("python_function", "torch/nn/modules/module.py(1750): _call_impl", base + 1.5, 40.0),
        span("python_function", "model.py(20): helper", round(base + 2.0, 3), 3.0),
        span("python_function", "model.py(30): step", round(base + 10.0, 3), 25.083),
        span("python_function", "other.py(1): elsewhere", round(base + 10.0, 3), 80.0, tid=7),
        span("cpu_op", "aten::item", round(base + 11.222, 3), 23.861),
        span("cpu_op", "aten::add", round(base + 60.0, 3), 1.0),
    )
    trace = load_trace_from(doc)
    item = by_name(trace, "aten::item")
    # the standard library's and torch's frames are dropped as the trace is read, but counted
    assert [f.name for f in trace.python_frames(item)] == [
        "model.py(30): step",
        "model.py(10): forward",
    ]
    assert trace.frames_seen == 6
    add = by_name(trace, "aten::add")
    assert list(trace.python_frames(add)) == []
    no_stacks = load_trace_from(trace_doc(span("cpu_op", "aten::add", 0.0, 1.0)))
    assert list(no_stacks.python_frames(no_stacks.ops[0])) == []
    assert no_stacks.frames_seen == 0


def test_python_frames_written_out_of_order_are_found() -> None:
    doc = trace_doc(
        span("python_function", "b.py(2): inner", 5.0, 10.0),
        span("python_function", "a.py(1): outer", 0.0, 50.0),
        span("cpu_op", "aten::add", 6.0, 1.0),
    )
    trace = load_trace_from(doc)
    frames = trace.python_frames(trace.ops[0])
    assert [f.name for f in frames] == ["b.py(2): inner", "a.py(1): outer"]


GROUP = {"backend": "nccl", "rank": 1, "world_size": 4}


def _slow_path_traces(**top: Any) -> list[Trace]:
    """The same document read where the one-go decode cannot be used: an event with a NaN
    (the standard library parses it) and an event of a wrong type (msgspec, event by event)."""
    with_nan = trace_doc(
        span("cpu_op", "aten::add", 0.0, 10.0), span("cpu_op", "x", 1.0, math.nan), **top
    )
    wrong = span("cpu_op", "x", 1.0, 2.0) | {"ts": "1"}
    mistyped = trace_doc(span("cpu_op", "aten::add", 0.0, 10.0), wrong, **top)
    return [
        load_trace_from(with_nan),
        trace_load._decode_whole(json.dumps(mistyped).encode()),  # pyright: ignore[reportPrivateUsage]
    ]


def test_distributed_info_is_read_on_the_slow_paths_too() -> None:
    for trace in _slow_path_traces(distributedInfo=GROUP):
        assert (trace.backend, trace.rank, trace.world_size) == ("nccl", 1, 4)
        assert [op.name for op in trace.ops] == ["aten::add"]


def test_a_malformed_distributed_info_is_ignored_with_a_warning_on_every_path() -> None:
    bad = {"backend": "nccl", "rank": "one", "world_size": 4}
    traces = [
        *_slow_path_traces(distributedInfo=bad),
        load_trace_from(trace_doc(span("cpu_op", "aten::add", 0.0, 10.0), distributedInfo=bad)),
    ]
    for trace in traces:
        assert trace.world_size is None
        assert "ignored a malformed distributedInfo: 1" in trace.warnings
