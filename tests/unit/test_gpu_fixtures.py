"""The GPU path, checked in CI on real H200 recordings (fixtures/*/): no GPU needed here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kernelscope.analysis.ops import op_table
from kernelscope.analysis.trace_load import load_trace
from kernelscope.protocol import Sidecar
from kernelscope.report.build import replay_report
from kernelscope.report.schema import Report

from support import FIXTURES

# a profile's recording (its sidecar beside the meta); counters_probe is ncu's, not one
SCENARIOS = sorted(
    p.parent.name for p in FIXTURES.glob("*/meta.json") if (p.parent / "sidecar.json").is_file()
)


def _load(name: str) -> tuple[dict[str, Any], Sidecar, dict[str, Any]]:
    folder = FIXTURES / name
    meta = json.loads((folder / "meta.json").read_text())
    sidecar = msgspec.json.decode((folder / "sidecar.json").read_bytes(), type=Sidecar)
    report = json.loads((folder / "report.json").read_text())
    return meta, sidecar, report


class KeyAverage(msgspec.Struct):
    """A row of torch's key_averages() over the active steps, as the recording's worker
    (torch 2.11, H200) wrote it into the sidecar: the op table's independent check."""

    name: str
    calls: int
    self_cpu_us: float
    cpu_total_us: float
    self_device_us: float = 0.0
    device_total_us: float = 0.0
    flops: float = 0.0


def _key_averages(name: str) -> list[KeyAverage]:
    raw = msgspec.json.decode((FIXTURES / name / "sidecar.json").read_bytes())
    return msgspec.convert(raw["key_averages"], list[KeyAverage])


def _rebuild(name: str) -> Report:
    """The report as the server builds it, from the recorded trace and sidecar."""
    _, side, recorded = _load(name)
    return replay_report(
        FIXTURES / name / "trace.json.gz",
        side,
        recorded["function"]["qualname"],
        str(FIXTURES / "workloads" / Path(recorded["function"]["path"]).name),
    )


def test_every_scenario_was_recorded_on_a_gpu() -> None:
    assert set(SCENARIOS) >= {
        "matmul_add_64",
        "matmul_add_1024",
        "matmul_add_8192",
        "cos_cos",
        "mlp_64",
        "mlp_8192",
    }
    for name in SCENARIOS:
        meta, side, _ = _load(name)
        assert meta["gpu"] == "NVIDIA H200" and meta["cuda"], name
        assert side.device_type == "cuda" and side.device_name == "NVIDIA H200"
        assert "kernelscope profile" in meta["command"]
        assert sum(f.stat().st_size for f in (FIXTURES / name).iterdir()) < 2_000_000


@pytest.mark.parametrize("name", SCENARIOS)
def test_report_rebuilt_from_the_trace_matches_the_recorded_one(name: str) -> None:
    meta, _, recorded = _load(name)
    report = _rebuild(name)
    assert report.device.type == "cuda"
    assert report.timing.cpu_us_per_step == pytest.approx(recorded["timing"]["cpu_us_per_step"])
    cuda, was = report.timing.cuda_us_per_step, recorded["timing"]["cuda_us_per_step"]
    if "recorder" in meta:  # recorded 2026-12-01, before backward and graph work were counted
        assert cuda >= was * (1 - 1e-9)
        assert {o.name for o in report.ops} >= {o["name"] for o in recorded["ops"]}
    else:  # single-thread workloads, no graphs: as recorded
        assert cuda == pytest.approx(was)
        assert [o.name for o in report.ops] == [o["name"] for o in recorded["ops"]]
    names = {o.name for o in report.ops}
    assert not names & {"ks:call", "ProfilerStep*"}  # ours, not the function's
    if name != "syncs":  # the only workload that synchronizes itself
        assert "cudaDeviceSynchronize" not in names


# the worker wrote torch's key_averages() into the sidecar until 2026-12-01 (it cost 0.75 s)
KEYED = [n for n in SCENARIOS if b'"key_averages"' in (FIXTURES / n / "sidecar.json").read_bytes()]


@pytest.mark.parametrize("name", KEYED)
def test_ops_table_matches_torch_key_averages(name: str) -> None:
    ours = {o.name: o for o in op_table(load_trace(FIXTURES / name / "trace.json.gz"))}
    for row in _key_averages(name):
        if not row.name.startswith("aten::"):
            continue
        mine = ours[row.name]
        assert mine.calls == row.calls, row.name
        assert mine.self_cpu_us == pytest.approx(row.self_cpu_us, rel=0.01), row.name
        assert mine.cpu_total_us == pytest.approx(row.cpu_total_us, rel=0.01), row.name
        assert mine.self_cuda_us == pytest.approx(row.self_device_us, rel=0.01, abs=0.01), row.name
        assert mine.cuda_total_us == pytest.approx(row.device_total_us, rel=0.01, abs=0.01), (
            row.name
        )


def test_large_matmul_time_agrees_with_cuda_events() -> None:
    meta, side, _ = _load("matmul_add_8192")
    report = _rebuild("matmul_add_8192")
    events_us = meta["cuda_events"]["median_us"]  # a separate process, 50 event-timed calls
    assert report.timing.cuda_us_per_step == pytest.approx(events_us, rel=0.10)
    assert side.timing.us_per_call == pytest.approx(events_us, rel=0.10)
    mm = next(r for r in _key_averages("matmul_add_8192") if r.name == "aten::mm")
    tflops = mm.flops / (mm.self_device_us * 1e-6) / 1e12
    assert 600 < tflops < 1000  # the H200's dense bf16 matmul rate, measured ~780-810


def test_small_matmul_is_mostly_cpu_time() -> None:
    report = _rebuild("matmul_add_64")
    assert report.timing.cuda_us_per_step < 0.2 * report.timing.unprofiled_us_per_call


def test_cold_trace_gives_the_recorded_dead_window() -> None:
    _, side, _ = _load("matmul_add_8192")
    cold = load_trace(FIXTURES / "matmul_add_8192" / "cold.json.gz")
    entry = next(a for a in cold.user_annotations if a.name == "ks:cold")
    first = min(g.ts for g in cold.gpu_events if g.ts >= entry.ts)
    assert side.cold.entry_to_first_kernel_us == pytest.approx(first - entry.ts, abs=1.0)
    assert side.cold.process_fresh
    assert side.cold.entry_to_first_kernel_us > 10_000  # cuBLAS handles and GEMM module loading


def test_lines_carry_cuda_time_and_sync_points() -> None:
    report = _rebuild("syncs")
    by_line = {r.line: r for r in report.lines}
    assert by_line[8].syncs >= 1  # .item()
    assert by_line[9].syncs >= 1  # .cpu()
    assert by_line[10].syncs >= 1  # boolean mask
    assert by_line[11].syncs >= 1  # torch.cuda.synchronize()
    assert by_line[12].syncs == 0  # float() of a CPU tensor: no sync
    assert by_line[10].cuda_us > 0
    big = _rebuild("matmul_add_8192")
    assert big.lines[0].line == 11 and big.lines[0].cuda_us > 1000


def test_mlp_scaling_was_recorded_flat_then_linear() -> None:
    narrow = json.loads((FIXTURES / "mlp_64" / "meta.json").read_text())["scaling"]
    wide = json.loads((FIXTURES / "mlp_8192" / "meta.json").read_text())["scaling"]
    gpu = {b: v["timing"]["cuda_us_per_step"] for b, v in wide.items()}
    assert gpu["128"] / gpu["64"] == pytest.approx(2.0, rel=0.15)
    narrow_gpu = [v["timing"]["cuda_us_per_step"] for v in narrow.values()]
    assert max(narrow_gpu) < 2 * min(narrow_gpu)
