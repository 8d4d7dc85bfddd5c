"""Nsight Compute's raw CSV (fixtures/counters_probe, recorded on the H200) read into
per-kernel counters, matched to recorded traces of the same workloads and rolled up into
their roofline rows."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from kernelscope.analysis.counters import (
    CountersError,
    base_name,
    kernel_key,
    nvtx_range,
    one_call_kernels,
    pair_kernels,
    parse_ncu_csv,
)
from kernelscope.analysis.diagnose import analyze, load_sidecar
from kernelscope.analysis.trace_load import load_trace
from kernelscope.protocol import Counters, KernelCounters

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
PROBE = FIXTURES / "counters_probe"


@pytest.fixture(scope="module")
def measured() -> list[KernelCounters]:
    return parse_ncu_csv((PROBE / "ncu_raw_cache_all.csv").read_text())


def by_range(kernels: list[KernelCounters], name: str) -> list[KernelCounters]:
    return [k for k in kernels if k.nvtx == name]


def test_every_kernel_of_the_probe_is_read_with_its_range(measured) -> None:
    assert len(measured) == 29  # the CSV's data rows (ncu's ==PROF== lines and units row skipped)
    assert [k.nvtx for k in measured[:2]] == ["mm", "mm"]
    assert {k.nvtx for k in measured} == {
        "mm", "cos_cos", "embedding_bag", "gather_gpt2", "gather_dim0", "index_select", "gemv",
        "copy_fill", "conv", "sdpa", "flex", "triton_softmax", "layernorm_unfused",
    }  # fmt: skip


def test_gemm_flops_are_the_tensor_pipes_and_bytes_are_dram(measured) -> None:
    gemm = by_range(measured, "mm")[0]
    assert gemm.name.startswith("nvjet_sm90_tst_320x128")
    assert gemm.tensor_flops == 1_116_691_496_960  # 2·8192³ = 1.0995e12, within 1.6 %
    assert gemm.tensor_flops == pytest.approx(2 * 8192**3, rel=0.02)
    assert gemm.dram_read_bytes == 1_249_981_696
    assert gemm.dram_write_bytes == 130_368_000
    assert gemm.duration_us == pytest.approx(1380.544)  # ns in the CSV
    assert gemm.sm_pct == pytest.approx(93.40)
    assert gemm.memory_pct == pytest.approx(94.56)
    assert gemm.occupancy_pct == pytest.approx(14.78)
    assert gemm.fp32_flops == 0


def test_the_convolutions_flops_are_exact(measured) -> None:
    convs = [k for k in by_range(measured, "conv") if k.tensor_flops]
    assert len(convs) == 2  # NCHW and channels_last
    n, h, w, k, c, r, s = 128, 56, 56, 256, 256, 3, 3
    assert all(x.tensor_flops == 2 * n * h * w * k * c * r * s for x in convs)


def test_the_embedding_bag_moves_only_the_gathered_rows(measured) -> None:
    bag = by_range(measured, "embedding_bag")[-1]
    assert bag.dram_bytes == pytest.approx(281.6e6, rel=0.01)  # not the 2 GB table
    assert bag.duration_us == pytest.approx(160.2, abs=0.1)


def test_fp32_flops_count_fma_twice(measured) -> None:
    softmax = by_range(measured, "triton_softmax")[0]
    assert softmax.fp32_flops is not None and softmax.fp32_flops > 32768 * 4096
    assert softmax.tensor_flops == 0


def test_cache_control_none_gives_the_same_dram_bytes_here() -> None:
    none = parse_ncu_csv((PROBE / "ncu_raw_cache_none.csv").read_text())
    a = {k.nvtx: k for k in parse_ncu_csv((PROBE / "ncu_raw_cache_all.csv").read_text())}
    b = {k.nvtx: k for k in none}
    assert a["embedding_bag"].dram_bytes == pytest.approx(b["embedding_bag"].dram_bytes, rel=0.05)


def test_output_without_a_table_says_no_kernel_was_measured() -> None:
    with pytest.raises(CountersError, match="no kernel"):
        parse_ncu_csv("==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n")


def test_names_match_across_kineto_and_ncu_spellings() -> None:
    assert base_name("void at::vectorized_elementwise_kernel<4, at::cos_kernel_cuda>(int)") == (
        "vectorized_elementwise_kernel"
    )
    assert base_name("void at::<unnamed>::EmbeddingBag_updateOutputKernel_sum_mean<float>()") == (
        "EmbeddingBag_updateOutputKernel_sum_mean"
    )
    assert base_name("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT") == (
        "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT"
    )
    assert nvtx_range('588  "<default domain>:mm:none:none:none:none:none:none" ') == "mm"
    assert nvtx_range("") == ""


def _with_counters(scenario: str, rng: str) -> tuple[object, Counters]:
    trace = load_trace(FIXTURES / scenario / "trace.json.gz")
    side = load_sidecar(FIXTURES / scenario / "sidecar.json")
    kernels = parse_ncu_csv((PROBE / "ncu_raw_cache_all.csv").read_text())
    counters = Counters(kernels=[k for k in kernels if k.nvtx == rng], seconds=45.0)
    return trace, msgspec.structs.replace(side, counters=counters)


def test_the_trace_of_the_same_call_pairs_every_measured_kernel() -> None:
    trace, side = _with_counters("matmul_add_8192", "mm")
    assert isinstance(side, object)
    plain = analyze(trace, load_sidecar(FIXTURES / "matmul_add_8192" / "sidecar.json"))
    steps = plain.steps
    traced = one_call_kernels(
        [g for g in trace.gpu_events if g.cat == "kernel" and g.op >= 0], steps
    )
    counters = side.counters  # type: ignore[attr-defined]
    pairs = pair_kernels(traced, counters.kernels)
    assert len(pairs) == 2
    assert [base_name(g.name) for g, _ in pairs] == [base_name(m.name) for _, m in pairs]


def test_roofline_rows_take_the_measured_bytes_and_flops() -> None:
    trace, side = _with_counters("matmul_add_8192", "mm")
    rows = analyze(trace, side).roofline  # type: ignore[arg-type]
    mm = next(r for r in rows if r.name == "aten::mm")
    assert mm.measured
    assert mm.flops_per_step == 1_116_691_496_960
    assert mm.bytes_per_step == 1_249_981_696 + 130_368_000
    assert mm.bound == "compute"
    assert mm.sm_pct == pytest.approx(93.40)
    add = next(r for r in rows if r.name == "aten::add")
    assert add.measured and add.bound == "memory"
    assert add.bytes_per_step == pytest.approx(385.1e6, rel=0.01)  # 3 × 128 MiB, from DRAM


def test_rows_stay_estimated_without_counters() -> None:
    trace = load_trace(FIXTURES / "cos_cos" / "trace.json.gz")
    rows = analyze(trace, load_sidecar(FIXTURES / "cos_cos" / "sidecar.json")).roofline
    assert rows and not any(r.measured for r in rows)


def test_an_unmatched_call_leaves_the_rows_estimated() -> None:
    trace, side = _with_counters("cos_cos", "mm")  # the GEMM's kernels, not this call's
    rows = analyze(trace, side).roofline  # type: ignore[arg-type]
    assert not any(r.measured and r.name == "aten::cos" for r in rows)


def test_kineto_and_ncu_spellings_of_one_kernel_share_a_key() -> None:
    kineto = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::cos_kernel_cuda(at::"
        "TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}>(int)"
    )
    ncu = (
        "void at::vectorized_elementwise_kernel<4, at::cos_kernel_cuda(at::TensorIteratorBase "
        "&)::[lambda() (instance 2)]::operator ()() const::[lambda() (instance 2)]>(int)"
    )
    assert (
        kernel_key(kineto)
        == kernel_key(ncu)
        == (
            "vectorized_elementwise_kernel",
            "cos_kernel_cuda",
        )
    )
    add = "void at::vectorized_elementwise_kernel<8, at::CUDAFunctor_add<c10::BFloat16>>(int)"
    assert kernel_key(add) != kernel_key(ncu)  # same kernel template, another functor


def test_a_name_printed_without_templates_still_pairs_in_order() -> None:
    trace = load_trace(FIXTURES / "cos_cos" / "trace.json.gz")
    traced = one_call_kernels([g for g in trace.gpu_events if g.op >= 0], 5)
    bare = [KernelCounters(name="vectorized_elementwise_kernel", duration_us=1.0)] * 2
    assert len(pair_kernels(traced, bare)) == 2
    other = [
        KernelCounters(
            name="void at::vectorized_elementwise_kernel<8, at::CUDAFunctor_add<float>>(int)",
            duration_us=1.0,
        )
    ]
    assert pair_kernels(traced, other) == []


def test_ks701_says_its_figures_were_measured() -> None:
    # The misaligned vocabulary GEMM (H200 fixture) with counters for its one kernel: the row
    # and the finding take them and say so; without them, the model's.
    folder = FIXTURES / "gemm_misaligned"
    trace = load_trace(folder / "trace.json.gz")
    side = load_sidecar(folder / "sidecar.json")
    before = next(f for f in analyze(trace, side).findings if f.code == "KS701")
    assert before.evidence["figures"] == "model" and "measured" not in before.message
    name = next(g.name for g in trace.gpu_events if g.cat == "kernel")
    flops = 2 * 8192 * 4096 * 50257  # what the tensor pipe would count for this GEMM
    kernel = KernelCounters(
        name=name, duration_us=24_700.0, tensor_flops=flops, dram_read_bytes=1.4e9
    )
    measured = msgspec.structs.replace(side, counters=Counters(kernels=[kernel]))
    after = analyze(trace, measured)
    slow = next(f for f in after.findings if f.code == "KS701")
    assert slow.evidence["figures"] == "measured"
    assert "(bf16 989 TFLOP/s, measured)" in slow.message
    row = next(r for r in after.roofline if r.name == "aten::mm")
    assert row.measured and row.flops_per_step == flops and row.bytes_per_step == 1.4e9


def test_a_call_longer_than_the_launch_count_says_only_its_first_kernels_were_measured() -> None:
    """Qwen2's decode step (358 kernels) on the H200: ncu measured its first 64, none of its
    costliest rows (docs/h200-run/fourth/counters.txt); the line says so."""
    from kernelscope.render.text import counters_lines

    kernels = [KernelCounters(name="vectorized_elementwise_kernel", duration_us=2.0)] * 64
    counters = Counters(kernels=kernels, seconds=49.1, launch_count=64)
    cut = counters_lines(counters, 358.0)[1]
    assert "measured the first 64 of the call's 358 kernels (one warm call) in 49.1 s" in cut
    assert cut.endswith("; rows of the later kernels are the model's")
    whole = counters_lines(Counters(kernels=kernels[:29], seconds=35.0, launch_count=64), 29.0)
    assert "measured 29 kernels of one warm call in 35.0 s" in whole[1]
    assert "later kernels" not in whole[1]


def test_the_costliest_functions_measured_are_named() -> None:
    from kernelscope.render.text import counters_lines

    kernels = [KernelCounters(name="gemv2T_kernel_val", duration_us=9.0)] * 40
    functions = ["CatArrayBatchedCopy", "gemv2T_kernel_val", "indexSelectSmallIndex", "Kernel2"]
    counters = Counters(kernels=kernels, seconds=30.2, launch_count=64, functions=functions)
    line = counters_lines(counters, 358.0)[1]
    assert "measured 40 of one warm call's 358 kernels, those of the functions of its " in line
    assert "(CatArrayBatchedCopy, gemv2T_kernel_val, indexSelectSmallIndex, …: 4, each op " in line
    assert "later kernels" not in line


def test_a_kernel_name_with_a_return_type_gives_its_function() -> None:
    """cuBLAS's GEMV kernels are named after a SFINAE return type: the function is the last
    name before the parameters (ncu selects them by it under --counters)."""
    from kernelscope.analysis.counters import base_name

    gemv = (
        "std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, "
        "float, float, false, true, true, false, 7, false, cublasGemvParamsEx<int, "
        "cublasGemvTensorStridedBatched<float const>, float> >(cublasGemvParamsEx<int, "
        "cublasGemvTensorStridedBatched<float const>, float>)"
    )
    assert base_name(gemv) == "kernel"
    ncu = (
        "void vectorized_elementwise_kernel<4, void unnamed>::pow_tensor_scalar_kernel_impl<float,"
        " float>(TensorIteratorBase &, T2)::[lambda(float) (instance 1)], std::array<char *, 2>>"
        "(int, T2, T3)"
    )
    assert base_name(ncu) == "vectorized_elementwise_kernel"  # its brackets do not balance
