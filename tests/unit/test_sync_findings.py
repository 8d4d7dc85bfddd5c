"""KS301, host-device syncs: what counts as one (docs/findings.md#ks301). On hand-made traces
(tests/support/traces.py) and the recorded H200 fixtures (fixtures/<name>/)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from kernelscope.analysis.diagnose import Analysis, analyze
from kernelscope.analysis.facts import Options
from kernelscope.analysis.peaks import datasheet_peaks
from kernelscope.analysis.trace_model import load_trace
from kernelscope.findings import Code
from kernelscope.protocol import Sidecar

from support import FIXTURES

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
