"""KS501, elementwise chains (docs/findings.md#ks501): only about work that matters, at least
2 % of the calls' GPU time and 5 µs per step. On hand-made one-step traces and the recorded
H200 fixtures (fixtures/<name>/)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from kernelscope.analysis.diagnose import analyze
from kernelscope.analysis.facts import Options
from kernelscope.analysis.peaks import datasheet_peaks
from kernelscope.analysis.trace_load import decode_trace, load_trace
from kernelscope.findings import Code
from kernelscope.protocol import Sidecar

from support import FIXTURES
from support.traces import F32, MM, doc, dumps, gpu, launch, op, step

X = ([64, 32], F32), ([64, 32], F32)
H200 = datasheet_peaks("NVIDIA H200")


def one_step(gemm_us: float, elementwise_us: float) -> dict[str, Any]:
    """One step: an aten::mm's kernel of ``gemm_us`` (none at 0), then aten::mul and aten::add
    launching kernels of ``elementwise_us`` each, back to back: a chain of two."""
    events = [step(1, 0.0, 30_000.0)]
    t = 20.0
    if gemm_us:
        events += [
            op("aten::mm", 5.0, 10.0, 2, *MM),
            launch("cudaLaunchKernel", 6.0, 2.0, 21),
            gpu("gemm", t, gemm_us, 21, ext=2),
        ]
        t += gemm_us
    for k, name in enumerate(("aten::mul", "aten::add")):
        host = 20.0 + 20.0 * k
        events += [
            op(name, host, 10.0, 3 + k, *X),
            launch("cudaLaunchKernel", host + 2.0, 2.0, 22 + k),
            gpu(f"{name[6:]}_kernel", t, elementwise_us, 22 + k, ext=3 + k),
        ]
        t += elementwise_us
    return doc(*events)


def chains(document: dict[str, Any]) -> list[str]:
    a = analyze(decode_trace(dumps(document)))
    return [f.message for f in a.findings if f.code == Code.ELEMENTWISE_CHAIN]


@pytest.mark.parametrize(
    ("gemm_us", "elementwise_us", "why"),
    [
        (1000.0, 2.0, "4 µs of 1004: 0.4 % and under 5 µs (a nanoGPT step's 56 B chain)"),
        (10_000.0, 50.0, "100 µs of 10.1 ms: 1 %"),
        (0.0, 2.0, "all the GPU time, but 4 µs per step"),
    ],
)
def test_a_trivial_chain_is_no_finding(gemm_us: float, elementwise_us: float, why: str) -> None:
    assert chains(one_step(gemm_us, elementwise_us)) == [], why


def test_a_chain_that_matters_is_a_finding() -> None:
    """40 µs of 1040: 3.8 % of the GPU time."""
    assert chains(one_step(1000.0, 20.0)) == [
        "2 elementwise kernels per step in chains (aten::mul ×1, aten::add ×1) moving 48.0 KiB "
        "per step: each kernel reads and writes the whole tensor"
    ]


# The recorded chains that matter keep their finding (live and raw): the share of GPU time each
# takes, at least.
KEPT = {
    "collate": 0.02,
    "gpt2_prefill": 0.02,
    "host_bound": 0.9,
    "resnet50": 0.02,
    "sdpa_flash_train": 0.02,
}


@pytest.mark.parametrize("name", sorted(KEPT))
def test_the_recorded_chains_that_matter_stay(name: str) -> None:
    folder = FIXTURES / name
    side = msgspec.json.decode((folder / "sidecar.json").read_bytes(), type=Sidecar)
    for a in (
        analyze(load_trace(folder / "trace.json.gz"), side, Options(peaks=H200)),
        analyze(load_trace(folder / "raw.json.gz"), None, Options(peaks=H200)),
    ):
        found = [f for f in a.findings if f.code == Code.ELEMENTWISE_CHAIN]
        assert len(found) == 1, name
        assert found[0].evidence["gpu_share"] >= KEPT[name], found[0].evidence
        assert found[0].evidence["gpu_us_per_step"] >= 5.0
