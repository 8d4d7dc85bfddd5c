"""Issue 24 item 3, "your own truth": the bytes and FLOPs model against Nsight Compute's
counters for the same single warm calls on the H200 (fixtures/counters_probe: ncu's raw CSV
and a torch.profiler trace of the same 13 calls, each in a range named for its workload).

Memory-type families: the model's bytes within 20 % of the traffic measured. GEMMs and
convolutions: the measured traffic at or above the model's (a minimum: each operand once) and
the FLOPs within 5 %. Counters measured with ``--cache-control all`` (each kernel from a cold
L2): a kernel's reads come from DRAM, but what it writes stays in the 50 MB L2 where it fits
and reaches DRAM after the kernel, charged to none (GPT-2's 6.3 MB embedding output: 256 B
written to DRAM). The traffic is therefore DRAM's bytes read and the bytes the SMs wrote
into L2 (``lts__t_sectors_srcunit_tex_op_write``, recorded 2026-12-04 in
ncu_raw_cache_all_l2w.csv; KernelCounters.moved_bytes), as ``--counters`` reports it."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from kernelscope.analysis.block_masks import apply_block_masks
from kernelscope.analysis.costs import OpCosts
from kernelscope.analysis.counters import apply_counters, parse_ncu_csv
from kernelscope.analysis.roofline import OpRoof, roofline
from kernelscope.analysis.trace_load import load_trace
from kernelscope.analysis.trace_model import USER_ANNOTATION, GpuEvent, Trace
from kernelscope.protocol import BlockMaskDensity, Counters, KernelCounters

PROBE = Path(__file__).resolve().parents[2] / "fixtures" / "counters_probe"
TRACE = PROBE / "probe_trace.json.gz"
pytestmark = pytest.mark.skipif(
    not TRACE.is_file(),
    reason="fixtures/counters_probe/probe_trace.json.gz is not recorded yet (on the H200: "
    "docs/h200-run/counters/record_trace_and_nanogpt.sh)",
)
WORKLOADS = (
    "mm",
    "cos_cos",
    "embedding_bag",
    "gather_gpt2",
    "gather_dim0",
    "index_select",
    "gemv",
    "copy_fill",
    "conv",
    "sdpa",
    "flex",
    "triton_softmax",
    "layernorm_unfused",
)
#: Where the model and the counters disagree, and why. Strict: a fixed one fails here until
#: its mark goes.
WRONG: dict[str, str] = {}
COMPUTE = ("mm", "conv")
MEMORY = tuple(n for n in WORKLOADS if n not in COMPUTE)  # sdpa, flex: their bytes too


@cache
def _trace() -> Trace:
    return load_trace(TRACE)


@cache
def _measured() -> tuple[KernelCounters, ...]:
    return tuple(parse_ncu_csv((PROBE / "ncu_raw_cache_all_l2w.csv").read_text()))


def _events(name: str) -> list[GpuEvent]:
    """The GPU work launched inside the workload's range (its ops start in it)."""
    trace = _trace()
    ranges = [o for o in trace.ops if o.cat == USER_ANNOTATION and o.name == name]
    assert len(ranges) == 1, name
    r = ranges[0]
    return [g for g in trace.gpu_events if g.op >= 0 and r.ts <= trace.ops[g.op].ts <= r.end]


def _rows(name: str) -> list[OpRoof]:
    """The model's rows of the range's kernels (a DtoD memcpy is no kernel: ncu skips it)."""
    rows = roofline(_trace(), _events(name), 1, None, OpCosts(), 132)
    return [r for r in rows if r.kernels_per_step > 0]


def _counted(name: str) -> list[KernelCounters]:
    return [k for k in _measured() if k.nvtx == name]


def _model(name: str) -> tuple[float, float]:
    rows = _rows(name)
    return (
        sum(r.bytes_per_step or 0.0 for r in rows),
        sum(r.flops_per_step or 0.0 for r in rows),
    )


def _truth(name: str) -> tuple[float, float]:
    kernels = _counted(name)
    return sum(k.moved_bytes or 0.0 for k in kernels), sum(k.flops or 0.0 for k in kernels)


def _marked(names: tuple[str, ...]) -> list[object]:
    return [
        pytest.param(n, marks=pytest.mark.xfail(reason=WRONG[n], strict=True)) if n in WRONG else n
        for n in names
    ]


def test_the_trace_and_the_counters_saw_the_same_kernels() -> None:
    for name in WORKLOADS:
        traced = [g for g in _events(name) if g.cat == "kernel"]
        assert len(traced) == len(_counted(name)), name
    assert len(_measured()) == 29


def test_dram_bytes_repeat_across_two_recordings() -> None:
    """The first recording (2026-12-02, without the L2 metric) and the second agree on DRAM."""
    first = parse_ncu_csv((PROBE / "ncu_raw_cache_all.csv").read_text())
    assert len(first) == len(_measured())
    for a, b in zip(first, _measured(), strict=True):
        assert a.name == b.name
        assert (b.dram_bytes or 0.0) == pytest.approx(a.dram_bytes or 0.0, rel=0.01, abs=1e5)


def test_the_traffic_counts_an_output_that_stayed_in_l2() -> None:
    (k,) = _counted("gather_gpt2")
    output = 8 * 512 * 768 * 2
    assert (k.dram_write_bytes or 0.0) < 1e3 and k.l2_write_bytes == pytest.approx(output)
    assert k.moved_bytes == pytest.approx((k.dram_read_bytes or 0.0) + output)


@pytest.mark.parametrize("name", _marked(MEMORY))
def test_memory_type_bytes_are_within_20_percent_of_dram(name: str) -> None:
    modelled, _ = _model(name)
    measured, _ = _truth(name)
    assert modelled == pytest.approx(measured, rel=0.20), (name, modelled, measured)


@pytest.mark.parametrize("name", COMPUTE)
def test_gemm_and_conv_dram_is_at_least_the_models_minimum(name: str) -> None:
    modelled, _ = _model(name)
    measured, _ = _truth(name)
    assert measured >= modelled, (name, modelled, measured)


@pytest.mark.parametrize("name", COMPUTE)
def test_gemm_and_conv_flops_are_within_5_percent(name: str) -> None:
    _, modelled = _model(name)
    _, measured = _truth(name)
    assert modelled == pytest.approx(measured, rel=0.05), (name, modelled, measured)


def test_gemv_flops_measured_include_the_tensor_pipes_padding() -> None:
    # N = 1 is padded to 8 on the tensor pipe: 8× the useful 2·N² FLOPs execute
    _, modelled = _model("gemv")
    _, measured = _truth("gemv")
    assert modelled == 2 * 16384**2
    assert measured == pytest.approx(8 * modelled, rel=0.01)


def test_causal_sdpa_flops_are_within_10_percent() -> None:
    # the mask's diagonal blocks run in full: 147 GFLOP measured, 137 modelled (half of 4·B·H·S²·D)
    _, modelled = _model("sdpa")
    _, measured = _truth("sdpa")
    assert modelled == pytest.approx(measured, rel=0.10)


def test_flex_attention_flops_fall_in_the_models_range() -> None:
    """A trace does not hold the block mask, so the model gives a range (the dense count
    above): the causal mask's measured FLOPs (half the dense count and the diagonal blocks)
    fall inside it."""
    (row,) = _rows("flex")
    _, measured = _truth("flex")
    assert row.estimate == "range" and row.flops_low_per_step is not None
    assert row.flops_low_per_step <= measured <= (row.flops_per_step or 0.0)
    assert measured == pytest.approx((row.flops_per_step or 0.0) / 2, rel=0.10)


def test_flex_attention_flops_from_its_live_masks_density_are_within_5_percent() -> None:
    """The probe printed its causal mask's ``sparsity()`` on the H200 (48.4375 %,
    probe_stdout_all.txt), as the worker reads a live mask after the cold call: the dense
    count times the computed blocks' share is the kernel's FLOPs, and it reads
    compute-bound."""
    printed = (PROBE / "probe_stdout_all.txt").read_text()
    sparsity = float(printed.split("flex block mask sparsity %")[1].split()[0])
    (row,) = _rows("flex")
    mask = BlockMaskDensity(shape=[1, 1, 4096, 4096], block_size=[128, 128], sparsity=sparsity)
    apply_block_masks(_trace(), [row], [mask], None)
    _, measured = _truth("flex")
    assert row.estimate == "mask" and row.flops_low_per_step is None
    assert (row.flops_per_step or 0.0) == pytest.approx(measured, rel=0.05)
    assert row.bound == "compute"
    # a live mask of another grid (a 2048-long sequence) says nothing of this kernel's
    (again,) = _rows("flex")
    other = BlockMaskDensity(shape=[1, 1, 2048, 2048], block_size=[128, 128], sparsity=10.0)
    apply_block_masks(_trace(), [again], [other], None)
    assert again.estimate == "range"


@pytest.mark.parametrize("name", WORKLOADS)
def test_every_row_of_every_workload_takes_the_measured_figures(name: str) -> None:
    rows = _rows(name)
    events = _events(name)
    counters = Counters(kernels=_counted(name))
    apply_counters(_trace(), events, 1, rows, counters, OpCosts(), None)
    assert rows and all(r.measured for r in rows), [(r.name, r.measured) for r in rows]
    measured, flops = _truth(name)
    assert sum(r.bytes_per_step or 0.0 for r in rows) == pytest.approx(measured)
    assert sum(r.flops_per_step or 0.0 for r in rows) == pytest.approx(flops)
