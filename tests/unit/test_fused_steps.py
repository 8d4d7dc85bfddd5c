"""Training steps with torch.optim's fused AdamW, plain and under a GradScaler, recorded on the
H200 with Nsight Compute's counters for the same workload (fixtures/adamw_fused*, issue 24):
the fused kernel moves 28 B a fp32 parameter (32 under a GradScaler, which has it write the
unscaled gradients back), AMP's unscale 8 B, and ``mean``'s backward reads the scalar it
expands once. Before these were modelled the scaled step and the unscale read 12 B each (their
0-d tensors alone) and the ``div`` twice what it moves."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest

from kernelscope.analysis.diagnose import Analysis
from kernelscope.analysis.roofline import OpRoof

from support import FIXTURES
from support.recorded import analyzed

PARAMETERS = 8 * (2048 * 2048 + 2048)  # fixtures/workloads/fused_step.py: 8 Linear(2048, 2048)
CASES = {"adamw_fused": 28, "adamw_fused_scaled": 32}  # bytes a parameter, a step


@cache
def analysis(name: str, raw: bool) -> Analysis:
    return analyzed(name, raw)


def measured(name: str) -> dict[tuple[str, str], dict[str, Any]]:
    report = json.loads((FIXTURES / name / "counters.json").read_text())
    return {(r["name"], r.get("shapes", "")): r for r in report["roofline"] if r.get("measured")}


def row(name: str, raw: bool, op: str) -> OpRoof:
    (found,) = [r for r in analysis(name, raw).roofline if r.name == op]
    return found


@pytest.mark.parametrize("raw", [False, True])
@pytest.mark.parametrize("name", list(CASES))
def test_the_fused_step_moves_its_lists_as_the_counters_measured(name: str, raw: bool) -> None:
    fused = row(name, raw, "aten::_fused_adamw_")
    assert fused.estimate == "model"
    per_call = (fused.bytes_per_step or 0.0) / fused.calls_per_step
    assert per_call == pytest.approx(CASES[name] * PARAMETERS)
    truth = measured(name)[(fused.name, fused.shapes)]
    assert truth["bytes_per_step"] == pytest.approx(fused.bytes_per_step, rel=0.02)
    assert fused.efficiency is not None and 0.5 < fused.efficiency <= 1.0


@pytest.mark.parametrize("raw", [False, True])
def test_amp_unscale_reads_and_writes_the_gradients(raw: bool) -> None:
    name = "adamw_fused_scaled"
    unscale = row(name, raw, "aten::_amp_foreach_non_finite_check_and_unscale_")
    per_call = (unscale.bytes_per_step or 0.0) / unscale.calls_per_step
    assert per_call == pytest.approx(8 * PARAMETERS)
    truth = measured(name)[(unscale.name, unscale.shapes)]
    assert truth["bytes_per_step"] == pytest.approx(unscale.bytes_per_step, rel=0.02)


@pytest.mark.parametrize("name", list(CASES))
def test_an_expanded_input_is_read_once(name: str) -> None:
    """``mean``'s backward: ``div`` of a scalar expanded to 64 x 2048, written whole."""
    div = row(name, False, "aten::div")
    assert div.bytes_per_step == pytest.approx(64 * 2048 * 4, rel=1e-4)
    truth = measured(name)[(div.name, div.shapes)]
    assert truth["bytes_per_step"] == pytest.approx(div.bytes_per_step, rel=0.05)


@pytest.mark.parametrize("raw", [False, True])
@pytest.mark.parametrize("name", list(CASES))
def test_no_row_is_above_its_roof(name: str, raw: bool) -> None:
    over = [(r.name, r.efficiency) for r in analysis(name, raw).roofline if (r.efficiency or 0) > 1]
    assert not over
