"""The collectives of one rank's trace: sizes, bandwidths as nccl-tests counts them, and the
overlap of communication with compute.

The NCCL events here are written the way torch's profiler writes them (kernel names and the
``Collective name``/``In msg nelems``/``Out msg nelems``/``Group size``/``dtype`` args it
adds to NCCL kernels); no 2-GPU recording exists yet, so these check the rules, not data,
but for a one-rank NCCL recording from the H200 whose args carry the same names.
The gloo path is checked on real 2- and 4-rank runs in tests/integration/test_distributed.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kernelscope.analysis.calls import find_calls
from kernelscope.analysis.collectives import (  # pyright: ignore[reportPrivateUsage]
    _nccl_args,
    bus_factor,
    communication,
)
from kernelscope.analysis.trace_load import decode_trace, load_trace
from kernelscope.analysis.trace_model import Trace
from kernelscope.render.text import communication_lines
from kernelscope.units import fmt_rate

from support import REPO_ROOT


def kernel(name: str, ts: float, dur: float, stream: int, corr: int, **args: Any) -> dict[str, Any]:
    return {
        "ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
        "args": {"device": 0, "stream": stream, "correlation": corr, **args},
    }  # fmt: skip


def launch(ts: float, corr: int) -> dict[str, Any]:
    return {
        "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
        "ts": ts, "dur": 2.0, "args": {"correlation": corr},
    }  # fmt: skip


def trace_of(events: list[dict[str, Any]], world: int = 8) -> Trace:
    call = {
        "ph": "X", "cat": "user_annotation", "name": "ks:call", "pid": 1, "tid": 1,
        "ts": 0.0, "dur": 1000.0, "args": {},
    }  # fmt: skip
    doc = {
        "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": world},
        "traceEvents": [call, *events],
    }
    return decode_trace(json.dumps(doc).encode())


def nccl_allreduce(ts: float, dur: float, corr: int, nelems: int = 1 << 20) -> dict[str, Any]:
    return kernel(
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        ts, dur, 20, corr,
        **{"Collective name": "allreduce", "In msg nelems": nelems, "Out msg nelems": nelems,
           "Group size": 8, "dtype": "BFloat16"},
    )  # fmt: skip


def test_an_all_reduce_half_hidden_under_a_compute_kernel() -> None:
    t = trace_of(
        [
            launch(10, 1), nccl_allreduce(100, 200, 1),
            launch(20, 2), kernel("sm90_xmma_gemm_bf16", 200, 300, 7, 2),
        ]
    )  # fmt: skip
    c = communication(t, find_calls(t))
    assert c is not None
    assert (c.world_size, c.rank, c.backend) == (8, 3, "nccl")
    (row,) = c.collectives
    assert (row.kind, row.dtype, row.bytes, row.calls) == ("all_reduce", "BFloat16", 2 << 20, 1)
    assert row.algbw_gbps == pytest.approx((2 << 20) / 200e-6 / 1e9)
    assert row.busbw_gbps == pytest.approx(row.algbw_gbps * 2 * 7 / 8)
    assert (c.comm_us, c.overlap_us, c.compute_us) == (200, 100, 300)
    assert c.overlap_share == 0.5
    assert (c.window_us, c.idle_us) == (400, 0)  # the call's GPU work: 100..500, all busy
    lines = communication_lines(c)
    assert "50% hidden under compute" in lines[0] and "rank 3 of 8" in lines[0]
    assert "all_reduce BFloat16 2.0 MiB × 1" in lines[1]


def test_gpu_work_after_its_call_window_is_still_its_call() -> None:
    """The host returns before the GPU is done: kernels launched in the call run after its
    window on the host, and count in full (the window is the call's GPU work)."""
    t = trace_of(
        [
            launch(100, 1), kernel("sm90_xmma_gemm_bf16", 900, 800, 7, 1),
            launch(200, 2), nccl_allreduce(1200, 400, 2),
            launch(300, 3), nccl_allreduce(1700, 100, 3),
        ]
    )  # fmt: skip
    c = communication(t, find_calls(t))
    assert c is not None
    assert (c.comm_us, c.overlap_us, c.compute_us) == (500, 400, 800)
    assert c.window_us == 900 and c.idle_us == 0  # 900..1800: the gemm, then the last one
    assert c.collectives[0].us == 500 and c.collectives[0].calls == 2


def test_each_collective_takes_its_own_groups_factor() -> None:
    pair = nccl_allreduce(100, 100, 1)
    pair["args"]["Group size"] = 2
    gather = kernel(
        "ncclDevKernel_AllGather_RING_LL", 300, 100, 20, 2,
        **{"Collective name": "allgather_into_tensor_coalesced", "In msg nelems": 1000,
           "Out msg nelems": 8000, "Group size": 8, "dtype": "Float"},
    )  # fmt: skip
    t = trace_of([launch(10, 1), pair, launch(20, 2), gather], world=16)
    c = communication(t, find_calls(t))
    assert c is not None and c.world_size == 16
    by_kind = {r.kind: r for r in c.collectives}
    assert by_kind["all_reduce"].group == 2
    assert by_kind["all_reduce"].busbw_gbps == pytest.approx(by_kind["all_reduce"].algbw_gbps)
    assert by_kind["all_gather"].group == 8
    assert by_kind["all_gather"].busbw_gbps == pytest.approx(
        by_kind["all_gather"].algbw_gbps * 7 / 8
    )


def test_sizes_and_factors_follow_nccl_tests() -> None:
    gather = kernel(
        "ncclDevKernel_AllGather_RING_LL", 100, 100, 20, 1,
        **{"Collective name": "_allgather_base", "In msg nelems": 1000, "Out msg nelems": 8000,
           "Group size": 8, "dtype": "Float"},
    )  # fmt: skip
    t = trace_of([launch(10, 1), gather])
    c = communication(t, find_calls(t))
    assert c is not None
    (row,) = c.collectives
    assert (row.kind, row.bytes) == ("all_gather", 32000)  # the larger: the gathered output
    assert row.busbw_gbps == pytest.approx(row.algbw_gbps * 7 / 8)
    assert bus_factor("all_reduce", 2) == 1.0
    assert bus_factor("reduce_scatter", 4) == 0.75
    assert bus_factor("broadcast", 8) == 1.0
    assert bus_factor("all_reduce", 1) == 1.0


def test_a_kernel_without_torchs_args_is_named_by_its_kernel() -> None:
    t = trace_of([launch(10, 1), kernel("ncclKernel_ReduceScatter_Sum_f32", 100, 50, 20, 1)])
    c = communication(t, find_calls(t))
    assert c is not None
    (row,) = c.collectives
    assert (row.kind, row.bytes, row.algbw_gbps) == ("reduce_scatter", 0, 0.0)
    assert "size unknown" in communication_lines(c)[1]


def test_collectives_outside_the_calls_and_traces_without_any_are_none() -> None:
    late = trace_of([launch(2000, 1), nccl_allreduce(2100, 100, 1)])
    assert communication(late, find_calls(late)) is None
    plain = trace_of([launch(10, 1), kernel("elementwise_kernel", 100, 50, 7, 1)])
    assert communication(plain, find_calls(plain)) is None


def test_gloo_all_gather_counts_every_ranks_share() -> None:
    ranged = {
        "ph": "X", "cat": "user_annotation", "name": "gloo:all_gather", "pid": 1, "tid": 9,
        "ts": 100.0, "dur": 100.0, "args": {"Input Dims": [[1000]], "Input type": ["float"]},
    }  # fmt: skip
    t = trace_of([ranged], world=4)
    c = communication(t, find_calls(t))
    assert c is not None and c.backend == "nccl"  # distributedInfo says so
    (row,) = c.collectives
    assert (row.kind, row.bytes) == ("all_gather", 16000)
    assert row.busbw_gbps == pytest.approx(row.algbw_gbps * 3 / 4)


@pytest.mark.parametrize(
    ("gbps", "text"),
    [(450.0, "450 GB/s"), (12.34, "12.3 GB/s"), (0.0575, "57.5 MB/s"), (2e-6, "2.0 kB/s")],
)
def test_rates(gbps: float, text: str) -> None:
    assert fmt_rate(gbps) == text


NCCL_ONE_RANK = REPO_ROOT / "fixtures" / "distributed" / "nccl_one_rank.json.gz"


def test_the_args_read_are_the_ones_torch_writes_on_the_h200() -> None:
    """A real one-rank NCCL recording (fixtures/README.md): its process group is read, its
    record_param_comms args decode to the collective's size, and with no collective kernel
    (one rank) nothing is timed."""
    trace = load_trace(NCCL_ONE_RANK)
    assert (trace.backend, trace.rank, trace.world_size) == ("nccl", 0, 1)
    params = [op for op in trace.cpu_ops if op.name == "record_param_comms"]
    decoded = {_nccl_args(op.args, "") for op in params}
    assert ("all_reduce", "BFloat16", (32 << 20) * 2, 1) in decoded  # 64 MiB of bf16
    assert len(find_calls(trace)) == 3
    assert communication(trace, find_calls(trace)) is None
