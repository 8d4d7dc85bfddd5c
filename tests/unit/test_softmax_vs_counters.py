"""Softmax and log-softmax, forward and backward, against Nsight Compute on the H200
(fixtures/softmax_probe: ncu's raw CSV and a torch.profiler trace of the same nine calls).
Rows too wide for shared memory run ATen's generic kernels, which read a row once per pass
(costs/softmax.py): each kernel's modelled bytes within 10 % of what it read from DRAM and
wrote (issue 24 items 1 and 3)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from kernelscope.analysis.costs import OpCosts
from kernelscope.analysis.costs.softmax import reread_bytes
from kernelscope.analysis.counters import parse_ncu_csv
from kernelscope.analysis.peaks import Peaks, datasheet_peaks
from kernelscope.analysis.roofline import OpRoof, roofline
from kernelscope.analysis.trace_load import load_trace
from kernelscope.analysis.trace_model import USER_ANNOTATION, OpInputs, Trace
from kernelscope.protocol import KernelCounters

PROBE = Path(__file__).resolve().parents[2] / "fixtures" / "softmax_probe"
CASES = (
    "log_softmax_4096x50432_float32",
    "log_softmax_4096x50432_bfloat16",
    "log_softmax_4096x32000_bfloat16",
    "log_softmax_1024x128256_bfloat16",
    "log_softmax_512x50432_float32",
    "softmax_8192x8192_float32",
    "softmax_8192x16384_bfloat16",
    "softmax_16384x1024_float32",
    "softmax_65536x4096_float32",
)
H200_SMS = 132


@cache
def _trace() -> Trace:
    return load_trace(PROBE / "probe_trace.json.gz")


@cache
def _peaks() -> Peaks:
    peaks = datasheet_peaks("NVIDIA H200")
    assert peaks is not None
    return peaks


@cache
def _measured() -> tuple[KernelCounters, ...]:
    """The kernels in the order they ran; a backward kernel (autograd's device thread, outside
    the main thread's NVTX range) in the range of the forward before it."""
    kernels = parse_ncu_csv((PROBE / "ncu_raw_cache_all.csv").read_text())
    last = ""
    for k in kernels:
        last = k.nvtx = k.nvtx or last
    return tuple(kernels)


def _rows(name: str) -> list[OpRoof]:
    """The model's rows of the case's kernels, in the order their kernels ran."""
    trace = _trace()
    (r,) = [o for o in trace.ops if o.cat == USER_ANNOTATION and o.name == name]
    events = sorted(
        (g for g in trace.gpu_events if g.op >= 0 and r.ts <= trace.ops[g.op].ts <= r.end),
        key=lambda g: g.ts,
    )
    rows = roofline(trace, events, 1, _peaks(), OpCosts(), H200_SMS)
    order = {trace.ops[g.op].name: i for i, g in enumerate(events)}
    return sorted((x for x in rows if x.kernels_per_step > 0), key=lambda x: order[x.name])


def test_the_trace_and_the_counters_saw_the_same_kernels() -> None:
    assert len(_measured()) == 22  # 5 log-softmax cases of 2 kernels, 4 softmax of 3
    for name in CASES:
        rows = _rows(name)
        kernels = [k for k in _measured() if k.nvtx == name]
        assert [r.kernels_per_step for r in rows] == [1.0] * len(kernels), name


@pytest.mark.parametrize("name", CASES)
def test_each_kernels_bytes_are_within_10_percent_of_the_counters(name: str) -> None:
    kernels = [k for k in _measured() if k.nvtx == name]
    for row, k in zip(_rows(name), kernels, strict=True):
        assert (row.bytes_per_step or 0.0) == pytest.approx(k.moved_bytes, rel=0.10), (
            row.name,
            row.kernel[:60],
        )


def test_the_generic_forward_counts_its_passes_only_where_the_rows_overflow_the_l2() -> None:
    by_name = {r.name: r for r in _rows("log_softmax_4096x50432_float32")}
    wide = by_name["aten::_log_softmax"]
    assert "cunn_SoftMaxForward<" in wide.kernel
    assert wide.bytes_per_step == pytest.approx(4 * 4096 * 50432 * 4)  # 3 reads, 1 write
    fits = {r.name: r for r in _rows("log_softmax_4096x32000_bfloat16")}["aten::_log_softmax"]
    assert fits.bytes_per_step == pytest.approx(2 * 4096 * 32000 * 2)  # the L2 kept the rows


def test_rows_held_on_chip_read_once() -> None:
    for name in ("softmax_8192x8192_float32", "softmax_16384x1024_float32"):
        forward = {r.name: r for r in _rows(name)}["aten::_softmax"]
        assert "cunn_SoftMaxForward<" not in forward.kernel
        rows, cols = (int(n) for n in name.split("_")[1].split("x"))
        assert forward.bytes_per_step == pytest.approx(2 * rows * cols * 4)


def _inputs(shape: list[int], dtype: str) -> OpInputs:
    return OpInputs(dims=[shape, [], []], types=[dtype, "Int", "Bool"])


def test_reread_bytes_needs_the_generic_kernel_and_for_a_forward_the_gpus_l2() -> None:
    wide = _inputs([4096, 50432], "float")
    size = 4096 * 50432 * 4
    generic = "void at::native::cunn_SoftMaxForward<4, float, float, float, Epilogue>(...)"
    l2 = 50 * 2**20
    assert reread_bytes("aten::_log_softmax", wide, generic, 132, l2) == 2 * size
    assert reread_bytes("aten::_log_softmax", wide, generic, None, l2) == 0.0
    assert reread_bytes("aten::_log_softmax", wide, generic, 132, 0.0) == 0.0
    smem = generic.replace("Forward<", "ForwardSmem<")
    assert reread_bytes("aten::_log_softmax", wide, smem, 132, l2) == 0.0
    backward = "void at::native::cunn_SoftMaxBackward<4, float, float, float, Epilogue>(...)"
    assert reread_bytes("aten::_log_softmax_backward_data", wide, backward, None, 0.0) == size
    assert reread_bytes("aten::add", wide, backward, 132, l2) == 0.0
    unknown = OpInputs(dims=[[], [], []], types=["", "Int", "Bool"])
    assert reread_bytes("aten::_log_softmax", unknown, generic, 132, l2) == 0.0
