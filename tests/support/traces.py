"""Builders of small hand-made Kineto documents, and the documents more than one test file
uses, each with its numbers worked out by hand in the comments (the tests assert exactly them).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

PID = TID = 100
F32, BF16 = "float", "c10::BFloat16"


# -- builders --------------------------------------------------------------------------------------


def span(cat: str, name: str, ts: float, dur: float, tid: int = TID, **args: Any) -> dict[str, Any]:
    """A complete ("X") host event; keyword args go to ``args`` ("_" read as " ")."""
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": PID,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": {k.replace("_", " "): v for k, v in args.items()},
    }


def op(
    name: str, ts: float, dur: float, ext: int, *shapes: tuple[list[Any], str]
) -> dict[str, Any]:
    """A ``cpu_op`` with its External id and, given shapes, ``Input Dims``/``Input type``."""
    args: dict[str, Any] = {"External_id": ext}
    if shapes:
        args["Input_Dims"] = [dims for dims, _ in shapes]
        args["Input_type"] = [dtype for _, dtype in shapes]
    return span("cpu_op", name, ts, dur, **args)


def launch(
    name: str, ts: float, dur: float, correlation: int, cat: str = "cuda_runtime"
) -> dict[str, Any]:
    """A runtime or driver call (launch, copy, sync) with its correlation id."""
    return span(cat, name, ts, dur, correlation=correlation)


def gpu(
    name: str,
    ts: float,
    dur: float,
    correlation: int,
    ext: int | None = None,
    device: int = 0,
    stream: int = 7,
    cat: str = "kernel",
) -> dict[str, Any]:
    """GPU work on ``device``/``stream``; Kineto's pid is the device and its tid the stream."""
    args: dict[str, Any] = {"device": device, "stream": stream, "correlation": correlation}
    if ext is not None:
        args["External id"] = ext
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": device,
        "tid": stream,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def step(n: int, ts: float, dur: float) -> dict[str, Any]:
    return span("user_annotation", f"ProfilerStep#{n}", ts, dur, External_id=1000 + n)


def doc(*events: dict[str, Any], **top: Any) -> dict[str, Any]:
    meta = {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "python"}}
    return {"schemaVersion": 1, "traceEvents": [meta, *events], **top}


def write(path: Path, document: dict[str, Any], compress: bool = False) -> Path:
    data = json.dumps(document).encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def dumps(document: object) -> bytes:
    return json.dumps(document).encode()  # writes NaN, Infinity and -Infinity as such


# -- documents -------------------------------------------------------------------------------------

#: A module whose outer() calls inner() twice: real traces with stacks are recorded from it
#: (inner's def on line 4, outer's on line 8).
NESTED_CALLS_MODULE = """import torch


def inner(a, b):
    return (a @ b).relu()


def outer(a, b):
    x = inner(a, b)
    return inner(x, b).sum()
"""

MM = ([64, 128], F32), ([128, 32], F32)
MM_FLOPS = 2 * 64 * 128 * 32  # 524,288
MM_BYTES = (64 * 128 + 128 * 32 + 64 * 32) * 4  # two inputs read, one output written: 57,344

# Two top-level record_function ranges and no ProfilerStep: each range is a step.
# fwd [0, 100]: aten::mm launches a 20 µs kernel at 30; bwd [200, 300]: the same at 230.
# Each range is a call: windows [0, 100] and [200, 300], busy 40 of 200 → overhead; 1 kernel
# and 20 µs of GPU per step (the idle stretch between the ranges is no call's).
ANNOTATED = doc(
    span("user_annotation", "fwd", 0.0, 100.0, External_id=1),
    op("aten::mm", 10.0, 30.0, 2, *MM),
    launch("cudaLaunchKernel", 20.0, 5.0, 11),
    gpu("gemm_a", 30.0, 20.0, 11, ext=2),
    span("user_annotation", "bwd", 200.0, 100.0, External_id=3),
    op("aten::mm", 210.0, 30.0, 4, *MM),
    launch("cudaLaunchKernel", 220.0, 5.0, 12),
    gpu("gemm_b", 230.0, 20.0, 12, ext=4),
)


# Two 100 µs steps of CPU work, no GPU event, no deviceProperties → host. A call is what a
# step encloses, from its first op to its last: [5, 90] and [105, 190], 85 µs each.
CPU_ONLY = doc(
    step(1, 0.0, 100.0),
    op("aten::mm", 5.0, 60.0, 2, *MM),
    op("aten::add", 70.0, 20.0, 3, ([64, 32], F32), ([64, 32], F32)),
    step(2, 100.0, 100.0),
    op("aten::mm", 105.0, 60.0, 4, *MM),
    op("aten::add", 170.0, 20.0, 5, ([64, 32], F32), ([64, 32], F32)),
    span("python_function", "train.py(3): step", 0.0, 200.0),
)


# One 100 µs step. aten::mm's kernel runs on stream 7 over [20, 60], aten::mul's on stream 9
# over [40, 80]: 80 µs of kernels but only 60 µs busy (the union). A cudaStreamSynchronize
# ends the step, inside train.py's step() (def line 12). The call spans the step's ops,
# [5, 95]: busy 60 of 90. No shapes: the costs are unknown.
TWO_STREAMS = doc(
    step(1, 0.0, 100.0),
    span("python_function", "train.py(12): step", 1.0, 98.0),
    op("aten::mm", 5.0, 10.0, 2),
    launch("cudaLaunchKernel", 6.0, 2.0, 21),
    gpu("gemm", 20.0, 40.0, 21, ext=2, stream=7),
    op("aten::mul", 20.0, 10.0, 3),
    launch("cudaLaunchKernel", 22.0, 2.0, 22),
    gpu("elementwise_mul", 40.0, 40.0, 22, ext=3, stream=9),
    launch("cudaStreamSynchronize", 85.0, 10.0, 23),
)


# A 2200 µs step on an MI300X: an 8192³ bf16 matmul launched by hipExtModuleLaunchKernel
# (hip_driver) runs [40, 2040]; an add launched by hipLaunchKernel (hip_runtime) runs
# [2040, 2140]; a hipStreamSynchronize waits 40 µs. The kernels name no External id: they
# link through correlation alone. Busy 2100 of the call's 2180 ([10, 2190]: its first op to
# the end of the sync).
# FLOPs 2·8192³; bytes: mm 3·8192²·2, add two bf16 reads and a write, 3·8192²·2 → AI 1365,
# above the MI300X's ridge (1307 TFLOP/s ÷ 5.3 TB/s = 247) → compute.
BIG = [8192, 8192]
MI300X = {"id": 0, "name": "AMD Instinct MI300X", "totalGlobalMem": 206_141_652_992}
ROCM = doc(
    step(1, 0.0, 2200.0),
    op("aten::mm", 10.0, 40.0, 2, (BIG, BF16), (BIG, BF16)),
    launch("hipExtModuleLaunchKernel", 20.0, 10.0, 101, cat="hip_driver"),
    gpu("Cijk_Alik_Bljk_BBS_BH_MT256x256x64", 40.0, 2000.0, 101, stream=0),
    op("aten::add", 60.0, 20.0, 3, (BIG, BF16), (BIG, BF16), ([], "Scalar")),
    launch("hipLaunchKernel", 65.0, 5.0, 102, cat="hip_runtime"),
    gpu("elementwise_kernel", 2040.0, 100.0, 102, stream=0),
    launch("hipStreamSynchronize", 2150.0, 40.0, 103, cat="hip_runtime"),
    deviceProperties=[MI300X],
)


# A raw torch.profiler trace of a user's loop (`for ...: step(x); prof.step()` in train.py,
# its <module> frame around all): two 100 µs steps, each an aten::mm launching a 20 µs kernel
# and a cudaStreamSynchronize that waits 15 µs, inside train.py's step() (def line 12). The
# calls are the steps' ops: [5, 60] and [105, 160]. After the last step, at the end of the
# profiler's window, its stop_trace synchronizes the device (cudaDeviceSynchronize, 50 µs at
# 210): on the user's `prof.step()` line, in no step (Kineto drops no frame, the trace model
# keeps the user's only: torch/profiler's frames around it are gone).
RAW_PROFILER_SYNC = doc(
    span("python_function", "train.py(1): <module>", 0.0, 300.0),
    step(1, 0.0, 100.0),
    span("python_function", "train.py(12): step", 2.0, 60.0),
    op("aten::mm", 5.0, 10.0, 2, *MM),
    launch("cudaLaunchKernel", 6.0, 2.0, 21),
    gpu("gemm", 20.0, 20.0, 21, ext=2),
    launch("cudaStreamSynchronize", 45.0, 15.0, 22),
    step(2, 100.0, 100.0),
    span("python_function", "train.py(12): step", 102.0, 60.0),
    op("aten::mm", 105.0, 10.0, 4, *MM),
    launch("cudaLaunchKernel", 106.0, 2.0, 31),
    gpu("gemm", 120.0, 20.0, 31, ext=4),
    launch("cudaStreamSynchronize", 145.0, 15.0, 32),
    launch("cudaDeviceSynchronize", 210.0, 50.0, 40),
)
