"""Raw torch.profiler traces of the fifteenth held-out pair (fixtures/llama_train,
fixtures/efficientnet_train: record_real.py on an H100 lent for the H200 kind, 2026-12-06),
training steps never tuned for: a transformers Llama under bf16 with fused AdamW, timm's
EfficientNet-B0 in channels_last under fp16 with a GradScaler. The raw trace alone reads
what kernelscope's live profile of the same call read (its figures are in meta.json)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kernelscope.analysis.diagnose import Analysis

from support import FIXTURES
from support.recorded import analyzed

PAIR = ["llama_train", "efficientnet_train"]


def meta(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name / "meta.json").read_text())


def raw(name: str) -> Analysis:
    return analyzed(name, raw=True)


@pytest.mark.parametrize("name", PAIR)
def test_the_raw_trace_reads_the_live_profiles_gpu_time_per_step(name: str) -> None:
    """Live 4,711.8 and 13,915.2 µs; raw 4,695 and 13,912."""
    live = meta(name)["live"]["cuda_us_per_step"]
    assert raw(name).verdict.cuda_us_per_step == pytest.approx(live, rel=0.01)


@pytest.mark.parametrize("name", PAIR)
def test_the_host_bound_step_reads_overhead_bound_below_its_wall(name: str) -> None:
    """The GPU busy 23 % and 39 % of the unprofiled call live: the host decides the time."""
    a = raw(name)
    assert a.verdict.bound == "overhead", a.verdict.summary
    wall = meta(name)["live"]["unprofiled_us_per_call"]
    assert 0 < a.verdict.cuda_us_per_step < 0.5 * wall


def test_the_grad_scalers_sync_is_the_one_sync_of_the_step() -> None:
    """GradScaler.step reads found_inf on the host (`.item()`): one sync per step; Llama's
    clipped step (foreach norms, fused AdamW) has none."""
    syncs = [f for f in raw("efficientnet_train").findings if f.code == "KS301"]
    assert len(syncs) == 1 and "1 per step" in syncs[0].message
    assert not [f for f in raw("llama_train").findings if f.code == "KS301"]
