"""The diagnoses on the recorded H200 fixtures, with the device's measured ceilings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec
import pytest

import kernelscope
from kernelscope.analysis.diagnose import Analysis, analyze, load_sidecar
from kernelscope.analysis.facts import Options, first_kernel_delay
from kernelscope.analysis.peaks import (
    Peaks,
    datasheet_peaks,
    load_calibrated,
    peaks_for,
    save_calibrated,
)
from kernelscope.analysis.trace_load import load_trace
from kernelscope.findings import Code

from support import FIXTURES, REPO_ROOT

DOCS = REPO_ROOT / "docs" / "findings.md"


def h200_measured() -> Peaks:
    """The ceilings measured on the GPU that recorded the fixtures."""
    cal = json.loads((FIXTURES / "h200_calibration.json").read_text())
    sheet = datasheet_peaks("NVIDIA H200")
    assert sheet is not None
    return Peaks(
        cal["gpu"],
        cal["bf16_matmul_tflops"],
        sheet.fp16_tflops,
        sheet.tf32_tflops,
        sheet.fp32_tflops,
        cal["copy_gbps"],
        source="calibrated",
    )


def run(name: str, peaks: Peaks | None = None) -> Analysis:
    folder = FIXTURES / name
    return analyze(
        load_trace(folder / "trace.json.gz"),
        load_sidecar(folder / "sidecar.json"),
        Options(peaks=peaks or h200_measured()),
        function_path=str(FIXTURES / "workloads" / "x.py"),
        cold_trace=load_trace(folder / "cold.json.gz"),
    )


def codes(analysis: Analysis) -> list[str]:
    return [f.code for f in analysis.findings]


def test_small_matmul_is_overhead_bound() -> None:
    for name in ("matmul_add_64", "matmul_add_1024", "mlp_64"):
        a = run(name)
        assert a.verdict.bound == "overhead", (name, a.verdict.summary)
        assert "KS101" in codes(a)
        assert a.verdict.gpu_busy_fraction_unprofiled is not None
        assert a.verdict.gpu_busy_fraction_unprofiled < 0.2


def test_large_matmul_is_compute_bound_at_the_rate_cuda_events_give() -> None:
    a = run("matmul_add_8192")
    assert a.verdict.bound == "compute"
    meta = json.loads((FIXTURES / "matmul_add_8192" / "meta.json").read_text())
    events_tflops = 2 * 8192**3 / (meta["cuda_events"]["median_us"] * 1e-6) / 1e12
    assert a.verdict.achieved_tflops == pytest.approx(events_tflops, rel=0.10)
    assert a.verdict.achieved_tflops / a.verdict.peak_tflops > 0.85  # of the measured 808
    assert a.verdict.arithmetic_intensity > a.verdict.ridge_point
    assert "KS103" in codes(a)
    queue = next(f for f in a.findings if f.code == "KS402")
    assert "saturated" in queue.message


def test_cos_cos_is_memory_bound_near_the_copy_ceiling() -> None:
    a = run("cos_cos")
    assert a.verdict.bound == "memory"
    copy_gbps = h200_measured().hbm_gbps
    assert a.verdict.achieved_gbps / copy_gbps > 0.70
    assert a.verdict.bytes_per_step == pytest.approx(
        4 * 2**28, rel=0.01
    )  # 2 × (read + write) of 256 MiB
    chain = next(f for f in a.findings if f.code == "KS501")
    assert "aten::cos ×2" in chain.message
    assert chain.line == 11  # `return x.cos().cos()` in the workload


def test_cold_traces_report_the_dead_window() -> None:
    for name in ("matmul_add_64", "matmul_add_8192", "cos_cos"):
        a = run(name)
        cold = load_trace(FIXTURES / name / "cold.json.gz")
        assert a.entry_to_first_kernel_us == pytest.approx(first_kernel_delay(cold))
        dead = next(f for f in a.findings if f.code == "KS201")
        assert dead.severity == "hint"
    dead = next(f for f in run("matmul_add_8192").findings if f.code == "KS201")
    assert re.search(r"\d+\.\d+ ms inside aten::mm \(cuBLAS handle", dead.message), dead.message


def test_sync_points_are_on_their_lines() -> None:
    a = run("syncs")
    lines = sorted(f.line for f in a.findings if f.code == "KS301")
    assert lines == [8, 9, 10, 11]
    assert all(f.severity == "warning" for f in a.findings if f.code == "KS301")
    bound = next(f for f in a.findings if f.code == "KS101")
    assert any("KS301" in t for t in bound.try_)


def test_our_own_synchronize_is_not_reported() -> None:
    for name in ("matmul_add_8192", "cos_cos", "mlp_8192"):
        assert "KS301" not in codes(run(name)), name


def test_calibrated_peaks_replace_the_datasheet(tmp_path: Path) -> None:
    cache = tmp_path / "peaks.json"
    assert peaks_for("NVIDIA H200", cache=cache) == datasheet_peaks("NVIDIA H200")
    save_calibrated(h200_measured(), cache)
    measured = peaks_for("NVIDIA H200", cache=cache)
    assert measured is not None and measured.source == "calibrated"
    assert measured.bf16_tflops == pytest.approx(808.25, rel=1e-3)
    a = analyze(
        load_trace(FIXTURES / "matmul_add_8192" / "trace.json.gz"),
        options=Options(peaks_cache=cache),
    )
    assert "measured peak" in a.verdict.summary
    cache.write_text("not json")
    assert load_calibrated(cache) == {}


def test_datasheet_lookup() -> None:
    assert datasheet_peaks("NVIDIA H100 PCIe").hbm_gbps == 2000  # type: ignore[union-attr]
    assert datasheet_peaks("NVIDIA H100 80GB HBM3").hbm_gbps == 3350  # type: ignore[union-attr]
    assert datasheet_peaks("NVIDIA A100-SXM4-40GB", 40 * 2**30).hbm_gbps == 1555  # type: ignore[union-attr]
    assert datasheet_peaks("NVIDIA A100-SXM4-80GB", 80 * 2**30).hbm_gbps == 2039  # type: ignore[union-attr]
    assert datasheet_peaks("Some Future GPU") is None


def test_every_code_is_documented() -> None:
    """Each Code has its section in findings.md, each section is a Code, and the codes the
    fixtures produce are among them."""
    text = DOCS.read_text()
    documented = set(re.findall(r'<a id="(ks\d{3})"></a>', text))
    assert documented == {c.value.lower() for c in Code}
    seen = {
        f.code
        for name in ("matmul_add_64", "matmul_add_8192", "cos_cos", "syncs")
        for f in run(name).findings
    }
    assert seen <= set(Code)


def test_codes_are_spelled_in_findings_py_only() -> None:
    package = Path(kernelscope.__file__).parent
    spelled = [
        f"{py.relative_to(package)}: {m.group(0)}"
        for py in package.rglob("*.py")
        if py.name != "findings.py"
        for m in re.finditer(r"[\"']KS\d{3}[\"']", py.read_text())
    ]
    assert not spelled


def test_analysis_serializes_to_json() -> None:
    data = json.loads(msgspec.json.encode(run("syncs")))
    assert data["verdict"]["bound"] == "overhead"
    assert {"code", "severity", "message", "path", "line"} <= set(data["findings"][0])
