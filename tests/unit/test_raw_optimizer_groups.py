"""A raw trace's foreach optimizer rows with two parameter groups (fixtures/convnextv2_adamw:
timm's ConvNeXt-V2 under timm's AdamW on the H200, 47 matrices with weight decay and 113
vectors without). The lists come from the gradients the first step accumulated; each group's
ops run on their own list, and with no 0-d list on the device (no capturable or fused step)
the vectors' ops are exact too, where the grids' bound had counted each vector a whole
chunk (113 x 65,536 elements for 73,880)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kernelscope.analysis.costs.foreach import gradient_lists, list_elements
from kernelscope.analysis.trace_load import load_trace

from support import FIXTURES

RAW = FIXTURES / "convnextv2_adamw" / "raw.json.gz"
ALL, MATRICES, VECTORS = 15_623_800, 15_549_920, 73_880
# fp32 bytes per element of each op as torch's foreach AdamW runs it (reads and writes)
PER_ELEMENT = {
    "aten::_foreach_lerp_": 12,  # exp_avg += (grad - exp_avg) * (1 - beta1)
    "aten::_foreach_addcmul_": 12,  # exp_avg_sq += grad * grad * (1 - beta2)
    "aten::_foreach_sqrt": 8,
    "aten::_foreach_div_": 8,
    "aten::_foreach_add_": 8,
    "aten::_foreach_addcdiv_": 16,  # param += exp_avg / denom * -step_size
}


def test_the_gradients_make_the_two_groups_lists() -> None:
    trace = load_trace(RAW)
    lists = gradient_lists(trace.cpu_ops, trace.steps[0].ts, trace.steps[0].end)
    assert lists == [
        (160, ALL, 380, "float32"),
        (47, MATRICES, 267, "float32"),
        (113, VECTORS, 113, "float32"),
    ]
    # where 0-d lists may run on the device, a list of as many tensors as blocks is none
    assert list_elements(lists, 113, "float32", zero_d=True) == 0
    assert list_elements(lists, 113, "float32", zero_d=False) == VECTORS


def test_each_foreach_row_is_exact_over_both_groups() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kernelscope", "analyze", str(RAW), "--json"],
        capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    report = json.loads(out.stdout)
    rows = {r["name"]: r for r in report["roofline"] if "_foreach_" in r["name"]}
    assert set(rows) == {*PER_ELEMENT, "aten::_foreach_mul_"}
    assert all(r["estimate"] == "model" for r in rows.values())
    for name, per in PER_ELEMENT.items():  # each op once a group a step: all the elements
        assert rows[name]["bytes_per_step"] == ALL * per, name
    # exp_avg_sq *= beta2 in both groups, and the decoupled weight decay on the matrices
    assert rows["aten::_foreach_mul_"]["bytes_per_step"] == (ALL + MATRICES) * 8
    assert max(r["efficiency"] or 0 for r in report["roofline"]) <= 1.0


def test_the_foreach_rows_are_within_half_a_percent_of_the_counters() -> None:
    """Nsight Compute on the step's 24 multi-tensor kernels (`--counters-match multi_tensor`,
    foreach_counters.json; none of them is among its 64 costliest kernels): every foreach row
    of the raw trace takes them whole, and the model's bytes are within 0.5 % of the DRAM
    reads plus L2 writes measured. The counters ride on another H200 job's sidecar with
    everything else of it emptied: only its device and its counters are read here."""
    import msgspec

    from kernelscope.analysis.counters import costliest_functions
    from kernelscope.analysis.diagnose import analyze, load_sidecar
    from kernelscope.analysis.timeline import build_timeline
    from kernelscope.protocol import Counters

    trace = load_trace(RAW)
    timeline = build_timeline(trace)
    chosen = costliest_functions(trace, timeline.events, timeline.steps, 64, "multi_tensor")
    assert chosen == (["multi_tensor_apply_kernel"], {}, "")
    assert costliest_functions(trace, timeline.events, timeline.steps, 64, "no_such") == (
        [],
        {},
        "",
    )
    # 24 launches: in 20, the pattern's function is named as left out, with its launches
    assert costliest_functions(trace, timeline.events, timeline.steps, 20, "multi_tensor") == (
        [],
        {"multi_tensor_apply_kernel": 24},
        "",
    )
    counters = msgspec.json.decode(
        (RAW.parent / "foreach_counters.json").read_bytes(), type=Counters
    )
    assert len(counters.kernels) == 24 and counters.match == "multi_tensor"
    other = load_sidecar(FIXTURES / "neox_train" / "sidecar.json")
    assert other.device_name == "NVIDIA H200"
    side = msgspec.structs.replace(
        other, counters=counters, optimizer_lists=[], launches=[], block_masks=[]
    )
    plain = {r.name: r for r in analyze(trace, None).roofline if "_foreach_" in r.name}
    every = analyze(trace, side).roofline
    rows = {r.name: r for r in every if "_foreach_" in r.name}
    assert set(rows) == set(plain) and len(rows) == 7
    for name, row in rows.items():
        assert row.measured, name
        assert row.bytes_per_step / plain[name].bytes_per_step == pytest.approx(1, abs=0.005)
    assert {r.name for r in every if r.measured} == set(rows)  # the other kernels: not asked
