"""Bad traces: the parser and the analyses, fuzzed with hypothesis, raise a one-line TraceError or
succeed; odd shapes, dims and frames are ignored, not errors. (What `kernelscope analyze` says
of bad traces: tests/integration/test_cli_analyze.py.)
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable
from functools import cache
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernelscope.analysis.diagnose import analyze
from kernelscope.analysis.trace_load import decode_trace
from kernelscope.analysis.trace_model import TraceError
from kernelscope.render.text import render_trace_analysis
from kernelscope.report.build import analyze_trace

from support import REPO_ROOT
from support.traces import ROCM, TWO_STREAMS, doc, dumps, gpu, launch, op, span, step

FIXTURE = REPO_ROOT / "fixtures" / "matmul_add_64" / "trace.json.gz"
FUZZ = settings(
    max_examples=int(os.environ.get("KS_FUZZ_EXAMPLES", "200")),  # more for a long hunt
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- fuzzing -------------------------------------------------------------------------------------


def survives(data: bytes) -> None:
    """Everything `analyze` does with a trace raises TraceError or succeeds."""
    try:
        trace = decode_trace(data)
        analysis = analyze(trace)
        msgspec.json.encode(analysis)
        result = analyze_trace("fuzz.json", trace)
        msgspec.json.encode(result)
        render_trace_analysis(result)
    except TraceError as e:
        assert str(e) and "\n" not in str(e)


@cache
def fixture_bytes() -> bytes:
    return gzip.decompress(FIXTURE.read_bytes())


Mutation = Callable[[bytearray], None]


@st.composite
def mutations(draw: st.DrawFn) -> Mutation:
    kind = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
    where = draw(st.floats(0.0, 1.0))
    blob = draw(
        st.one_of(
            st.binary(min_size=1, max_size=8),
            st.sampled_from(
                [b"{", b"}", b"[", b"]", b'"', b",", b":", b"-", b"NaN", b"1e999", b"null"]
            ),
        )
    )
    bit = draw(st.integers(0, 7))

    def apply(data: bytearray) -> None:
        i = min(int(where * len(data)), max(len(data) - 1, 0))
        if not data:
            data.extend(blob)
        elif kind == "flip":
            data[i] ^= 1 << bit
        elif kind == "set":
            data[i] = blob[0]
        elif kind == "cut":
            del data[i:]
        elif kind == "insert":
            data[i:i] = blob
        else:
            del data[i : i + len(blob)]

    return apply


@FUZZ
@given(st.lists(mutations(), min_size=1, max_size=6), st.booleans())
def test_fuzz_mutated_real_trace(changes: list[Mutation], compress: bool) -> None:
    data = bytearray(fixture_bytes())
    for change in changes:
        change(data)
    survives(gzip.compress(bytes(data), compresslevel=1) if compress else bytes(data))


@FUZZ
@given(st.data())
def test_fuzz_mutated_gzip(data: st.DataObject) -> None:
    blob = bytearray(gzip.compress(dumps(ROCM)))
    for change in data.draw(st.lists(mutations(), min_size=1, max_size=3)):
        change(blob)
    survives(bytes(blob))


NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, 0.0, -0.0, 1e-320, 1e18, 1e18 + 1, -1e18, 1e300]),
    st.floats(0, 1e4),
)
JUNK = st.recursive(
    st.none() | st.booleans() | NUMBERS | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)
DIM = st.one_of(
    st.integers(-3, 4096), st.integers(-(2**80), 2**80), st.just(10**400), st.booleans(), JUNK
)
DIMS = st.lists(st.one_of(st.lists(DIM, max_size=5), JUNK), max_size=4)
DTYPES = st.lists(
    st.one_of(
        st.sampled_from(
            [
                *("float", "c10::BFloat16", "c10::Half", "long int", "bool"),
                *("Scalar", "", "TensorList"),
            ]
        ),
        JUNK,
    ),
    max_size=4,
)
IDS = st.one_of(st.integers(-2, 6), st.integers(-(2**70), 2**70), JUNK)
NAMES = st.sampled_from(
    [
        *("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear"),
        *("aten::convolution", "aten::_scaled_dot_product_flash_attention"),
        *("aten::mul", "aten::add", "aten::sum", "aten::copy_", "aten::_local_scalar_dense"),
        *("ProfilerStep#1", "ProfilerStep#2", "ks:call", "ks:cold", "fwd", ""),
        *("cudaLaunchKernel", "cuLaunchKernelEx", "hipLaunchKernel", "cudaStreamSynchronize"),
        *("cudaMemcpyAsync", "cudaMemcpy", "cudaDeviceSynchronize", "hipMemcpy"),
        *("a.py(3): f", "/x/site-packages/t.py(1): g", "<string>(1): h", "b.py(x): k"),
        *("b.py(99999999999999999999999): k", "gemm", "Memcpy DtoH", f"c.py({'9' * 5000}): k"),
    ]
)
CONCRETE = st.sampled_from(["", "[0, 0]", "[2, 2]", "[-1, -1]", "[1]", "9" * 5000])
CATS = st.sampled_from(
    [
        *("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "hip_runtime"),
        *("kernel", "gpu_memcpy", "gpu_memset", "python_function", "gpu_user_annotation"),
    ]
)


@st.composite
def events(draw: st.DrawFn) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for key, values in (
        ("External id", IDS),
        ("correlation", IDS),
        ("device", IDS),
        ("stream", IDS),
        ("bytes", st.one_of(st.integers(-1, 2**70), JUNK)),
        ("Input Dims", DIMS),
        ("Input type", DTYPES),
        ("Concrete Inputs", st.lists(st.one_of(CONCRETE, JUNK), max_size=5)),
    ):
        if draw(st.booleans()):
            args[key] = draw(values)
    event: dict[str, Any] = {
        "ph": draw(st.sampled_from(["X", "X", "X", "X", "i", "M", "s", "f", "?"])),
        "cat": draw(CATS),
        "name": draw(NAMES),
        "pid": draw(st.one_of(st.integers(0, 2), st.just("gpu"))),
        "tid": draw(st.integers(0, 2)),
        "ts": draw(st.one_of(st.floats(0, 200), NUMBERS)),
        "dur": draw(st.one_of(st.floats(0, 100), NUMBERS)),
        "args": args if draw(st.integers(0, 9)) else draw(JUNK),
    }
    for key in list(event):
        if draw(st.integers(0, 19)) == 0:
            del event[key]  # a missing field
    return event


DEVICE_NAMES = st.sampled_from(["NVIDIA H200", "AMD Instinct MI300X", "NVIDIA A100", ""])
TOP = st.fixed_dictionaries(
    {},
    optional={
        "deviceProperties": st.one_of(
            st.lists(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "name": st.one_of(DEVICE_NAMES, JUNK),
                        "totalGlobalMem": st.one_of(st.integers(-1, 2**70), JUNK),
                    },
                ),
                max_size=2,
            ),
            JUNK,
        ),
        "baseTimeNanoseconds": NUMBERS,
    },
)


SIZE = st.one_of(
    st.integers(0, 4096),
    st.integers(-3, 3),
    st.sampled_from([2**62, 2**63, 2**64, 10**400, -(2**63)]),
    st.integers(-(2**80), 2**80),
)
OP_NAMES = st.sampled_from(
    [
        *("aten::mm", "aten::_scaled_mm", "aten::addmm", "aten::bmm", "aten::baddbmm"),
        *("aten::matmul", "aten::linear", "aten::convolution", "aten::conv2d"),
        *("aten::_scaled_dot_product_flash_attention", "aten::scaled_dot_product_attention"),
        *("aten::mul", "aten::add_", "aten::relu", "aten::sum", "aten::copy_", "aten::empty"),
    ]
)
TENSOR_TYPES = st.sampled_from(
    ["float", "c10::BFloat16", "c10::Half", "long int", "bool", "Scalar"]
)
LAUNCHES = st.sampled_from(
    [
        ("cuda_runtime", "cudaLaunchKernel"),
        ("cuda_driver", "cuLaunchKernelEx"),
        ("hip_runtime", "hipLaunchKernel"),
        ("hip_driver", "hipExtModuleLaunchKernel"),
        ("cuda_runtime", "cudaMemcpyAsync"),
        ("cuda_runtime", "cudaMemcpy"),
    ]
)


@st.composite
def linked(draw: st.DrawFn) -> list[dict[str, Any]]:
    """An op, the launch inside it and the GPU work it made, sharing their ids, with
    shapes that are right, odd or corrupt."""
    correlation, ext = draw(st.integers(0, 5)), draw(st.integers(0, 5))
    n = draw(st.integers(0, 4))
    args: dict[str, Any] = {
        "External id": ext,
        "Input Dims": draw(st.lists(st.lists(SIZE, max_size=5), min_size=n, max_size=n)),
        "Input type": draw(st.lists(TENSOR_TYPES, min_size=n, max_size=n)),
    }
    if draw(st.booleans()):
        args["Concrete Inputs"] = draw(st.lists(CONCRETE, max_size=5))
    ts = draw(st.floats(0, 200))
    host = {"ph": "X", "pid": 1, "tid": 1}
    cpu = host | {"cat": "cpu_op", "name": draw(OP_NAMES), "ts": ts, "dur": draw(st.floats(0, 50))}
    cat, name = draw(LAUNCHES)
    start = ts + draw(st.floats(0, 10))
    call = host | {"cat": cat, "name": name, "ts": start, "dur": draw(st.floats(0, 5))}
    work = {
        "ph": "X",
        "cat": draw(st.sampled_from(["kernel", "kernel", "gpu_memcpy", "gpu_memset"])),
        "name": "k",
        "pid": 0,
        "tid": 7,
        "ts": start + draw(st.floats(-5, 50)),
        "dur": draw(st.one_of(st.floats(0, 100), NUMBERS)),
        "args": {
            "device": draw(st.integers(0, 1)),
            "stream": draw(st.integers(7, 8)),
            "correlation": correlation,
            "External id": ext,
            "bytes": draw(st.one_of(st.integers(0, 2**20), SIZE)),
        },
    }
    return [cpu | {"args": args}, call | {"args": {"correlation": correlation}}, work]


@FUZZ
@given(
    st.lists(linked(), max_size=8),
    st.lists(events(), max_size=6),
    st.sampled_from(["ProfilerStep#1", "ks:call", None]),
    TOP,
)
def test_fuzz_linked_ops_with_odd_shapes(
    groups: list[list[dict[str, Any]]],
    other: list[dict[str, Any]],
    annotation: str | None,
    top: dict[str, Any],
) -> None:
    trace_events = [e for group in groups for e in group] + other
    if annotation:
        trace_events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": annotation,
                "pid": 1,
                "tid": 1,
                "ts": -1.0,
                "dur": 300.0,
            }
        )
    survives(dumps({"traceEvents": trace_events, **top}))


@FUZZ
@given(st.lists(events(), max_size=30), TOP)
def test_fuzz_generated_events(trace_events: list[dict[str, Any]], top: dict[str, Any]) -> None:
    survives(dumps({"traceEvents": trace_events, **top}))


@FUZZ
@given(st.lists(events(), max_size=15))
def test_fuzz_events_added_to_a_good_trace(extra: list[dict[str, Any]]) -> None:
    survives(dumps(TWO_STREAMS | {"traceEvents": [*TWO_STREAMS["traceEvents"], *extra]}))


def test_op_shapes_that_overflow_floats_are_ignored() -> None:
    """``Input Dims`` too large for a float give no FLOPs or bytes, not an OverflowError."""
    huge = [10**400, 2]
    trace = decode_trace(
        dumps(
            doc(
                step(1, 0.0, 100.0),
                op("aten::mm", 1.0, 10.0, 2, (huge, "float"), ([2, 3], "float")),
                launch("cudaLaunchKernel", 2.0, 1.0, 5),
                gpu("k", 20.0, 60.0, 5, ext=2),
                op("aten::mul", 30.0, 10.0, 3, (huge, "float"), (huge, "float")),
                launch("cudaLaunchKernel", 32.0, 1.0, 6),
                gpu("k", 80.0, 10.0, 6, ext=3),
            )
        )
    )
    v = analyze(trace).verdict
    assert v.flops_per_step is None and v.bytes_per_step is None


def test_negative_dims_give_no_flops() -> None:
    trace = decode_trace(
        dumps(
            doc(
                step(1, 0.0, 100.0),
                op("aten::mm", 1.0, 10.0, 2, ([-4, 2], "float"), ([2, 3], "float")),
                launch("cudaLaunchKernel", 2.0, 1.0, 5),
                gpu("k", 20.0, 60.0, 5, ext=2),
            )
        )
    )
    v = analyze(trace).verdict
    assert v.flops_per_step is None and v.achieved_tflops is None
    assert v.bytes_per_step is None


def test_convolution_with_zero_stride() -> None:
    conv = span(
        "cpu_op",
        "aten::convolution",
        1.0,
        10.0,
        External_id=2,
        Input_Dims=[[1, 3, 8, 8], [4, 3, 3, 3]],
        Input_type=["float", "float"],
        Concrete_Inputs=["", "", "", "[0, 0]"],
    )
    trace = decode_trace(
        dumps(
            doc(
                step(1, 0.0, 100.0),
                conv,
                launch("cudaLaunchKernel", 2.0, 1.0, 5),
                gpu("k", 20.0, 60.0, 5, ext=2),
            )
        )
    )
    assert analyze(trace).verdict.flops_per_step == pytest.approx(2 * 1 * 4 * 27 * 64)


def test_a_frame_line_number_too_long_for_int_is_not_a_place() -> None:
    """``int()`` refuses more than 4300 digits: such a frame is skipped, not a ValueError."""
    trace = decode_trace(
        dumps(
            doc(
                span("python_function", f"a.py({'9' * 5000}): f", 0.0, 100.0),
                span("python_function", "b.py(7): g", 1.0, 98.0, tid=2),
                launch("cudaDeviceSynchronize", 10.0, 5.0, 1),
            )
        )
    )
    (sync,) = [f for f in analyze(trace).findings if f.code == "KS301"]
    assert (sync.path, sync.line) == (None, None)  # b.py is on another thread
