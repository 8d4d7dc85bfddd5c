"""KS301, host-device syncs: what counts as one (docs/findings.md#ks301). On hand-made traces
(tests/support/traces.py) and the recorded H200 fixtures (fixtures/<name>/)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from kernelscope.analysis.diagnose import Analysis, analyze
from kernelscope.analysis.facts import Options
from kernelscope.analysis.peaks import datasheet_peaks
from kernelscope.analysis.trace_load import decode_trace, load_trace
from kernelscope.findings import Code
from kernelscope.protocol import LineStat, Sidecar

from support import FIXTURES
from support.sidecars import cpu_sidecar
from support.traces import CPU_ONLY, RAW_PROFILER_SYNC, dumps, launch

H200 = datasheet_peaks("NVIDIA H200")


def syncs(a: Analysis) -> list[tuple[str | None, int | None, str, str]]:
    return [
        (f.path and Path(f.path).name, f.line, f.severity, f.message)
        for f in a.findings
        if f.code == Code.SYNC
    ]


def live(name: str) -> Analysis:
    folder = FIXTURES / name
    side = msgspec.json.decode((folder / "sidecar.json").read_bytes(), type=Sidecar)
    return analyze(
        load_trace(folder / "trace.json.gz"),
        side,
        Options(peaks=H200),
        cold_trace=load_trace(folder / "cold.json.gz"),
    )


# -- GPU runs: KS301 as it was --------------------------------------------------------------------

# Every KS301 the recorded GPU fixtures (kernelscope's traces with their sidecars) show.
GPU_SYNCS = {
    "gpt2_prefill": [
        (
            "transformer.py",
            9,
            "warning",
            "host-device sync: 1 per call (aten::addmm, aten::is_nonzero), the CPU waiting "
            "1.39 ms per call",
        )
    ],
    "h2d_pageable": [
        (
            "copies.py",
            8,
            "warning",
            "host-device sync: 1 per call (aten::to, aten::_to_copy), the CPU waiting "
            "17.7 µs per call",
        )
    ],
    "syncs": [
        (
            "syncs.py",
            10,
            "warning",
            "host-device sync: 1 per call (aten::index, aten::nonzero), the CPU waiting "
            "6.0 µs per call",
        ),
        (
            "syncs.py",
            8,
            "warning",
            "host-device sync: 1 per call (aten::sum, aten::item), the CPU waiting 5.9 µs per call",
        ),
        (
            "syncs.py",
            11,
            "warning",
            "host-device sync: 1 per call (a synchronize or copy call), the CPU waiting "
            "4.9 µs per call",
        ),
        (
            "syncs.py",
            9,
            "warning",
            "host-device sync: 1 per call (aten::to, aten::_to_copy), the CPU waiting "
            "2.2 µs per call",
        ),
    ],
}


def test_the_recorded_gpu_runs_keep_their_sync_findings() -> None:
    """Every recorded GPU run with a sidecar: its KS301 findings, exactly (none elsewhere)."""
    for folder in sorted(FIXTURES.glob("*/sidecar.json")):
        name = folder.parent.name
        assert syncs(live(name)) == GPU_SYNCS.get(name, []), name


# -- the profiler's own syncs ---------------------------------------------------------------------


def test_the_profilers_sync_at_the_end_of_its_window_is_left_out() -> None:
    """RAW_PROFILER_SYNC: the user's two syncs stay on step()'s def line; the profiler's
    cudaDeviceSynchronize after the last step is no call's, and not on `prof.step()`'s line."""
    a = analyze(decode_trace(dumps(RAW_PROFILER_SYNC)))
    assert syncs(a) == [
        (
            "train.py",
            12,
            "warning",
            "host-device sync: 1 per step (cudaStreamSynchronize), the CPU waiting "
            "15.0 µs per step",
        )
    ]


RAW = sorted(p.parent.name for p in FIXTURES.glob("*/raw.json.gz"))
# The raw traces' syncs that are the user's: transformers' causal mask (`is_nonzero`) under
# GPT-2's prefill and BART's decoder, and the pageable copy's wait, each once
# per step inside the call.
# Each named by the aten op the user's code called around the runtime's sync: a tensor used
# as a Python bool (`if mask.any():`, `is_nonzero`), `.to("cpu")`, `.item()`.
RAW_SYNCS = {
    "bart_adamw": "host-device sync: 1 per step (aten::is_nonzero → cudaStreamSynchronize), "
    "the CPU waiting 11.3 µs per step",
    "gpt2_prefill": "host-device sync: 1 per step (aten::is_nonzero → cudaStreamSynchronize), "
    "the CPU waiting 1.90 ms per step",
    "h2d_pageable": "host-device sync: 1 per step (aten::to → cudaStreamSynchronize), the CPU "
    "waiting 10.2 µs per step",
    # GradScaler.step reads found_inf on the host (`.item()`)
    "efficientnet_train": "host-device sync: 1 per step (aten::item → cudaStreamSynchronize), "
    "the CPU waiting 20.6 µs per step",
}


def test_raw_traces_show_only_the_users_syncs() -> None:
    """Each raw trace of the suite ends with the profiler's cudaDeviceSynchronize (stop_trace,
    after the last step): no KS301 for it, and no advice to remove syncs because of it."""
    assert len(RAW) >= 10
    for name in RAW:
        a = analyze(load_trace(FIXTURES / name / "raw.json.gz"), None, Options(peaks=H200))
        expected = [m for n, m in RAW_SYNCS.items() if n == name]
        assert [m for *_, m in syncs(a)] == expected, name
        if not expected:
            assert not any("KS301" in t for f in a.findings for t in f.try_), name


# -- CPU runs -------------------------------------------------------------------------------------


# What the line pass counts on a CPU run: `.item()` on a CPU index (a nanoGPT sampler's
# randint, an optimizer's step), `nonzero()` on a CPU mask.
ITEM = LineStat("train.py", 5, 10.0, 10.0, hits=1.0, syncs=1, top_ops=["aten::item"])
NONZERO = LineStat("train.py", 6, 10.0, 10.0, hits=1.0, syncs=2, top_ops=["aten::nonzero"])


def test_a_cpu_run_claims_no_device_sync_for_cpu_tensors() -> None:
    """CPU_ONLY with a CPU sidecar: the line pass's `.item()`/`nonzero()` read CPU tensors;
    there is no device to wait for, so no KS301 (it said "on a GPU this line would wait")."""
    a = analyze(decode_trace(dumps(CPU_ONLY)), cpu_sidecar(ITEM, NONZERO))
    assert syncs(a) == []
    assert not any("KS301" in t for f in a.findings for t in f.try_)


def test_a_cpu_run_reports_a_sync_the_trace_shows() -> None:
    """The same run with a cudaMemcpy in the first call (a tensor on a device after all): the
    runtime call is a sync, from the trace, at train.py's step() (def line 3)."""
    events = [*CPU_ONLY["traceEvents"], launch("cudaMemcpy", 80.0, 6.0, 50)]
    a = analyze(decode_trace(dumps({**CPU_ONLY, "traceEvents": events})), cpu_sidecar(ITEM))
    assert syncs(a) == [
        (
            "train.py",
            3,
            "warning",
            "host-device sync: 0.5 per step (aten::add → cudaMemcpy), the CPU waiting 3.0 µs "
            "per step",
        )
    ]
