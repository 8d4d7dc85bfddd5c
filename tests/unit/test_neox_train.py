"""A GPT-NeoX training step under bf16 autocast with AdamW, from its config (issue 24's seventh
held-out set, fixtures/neox_train: live and raw traces on the H200, and a --counters run of the
same workload). Its log-softmax over a 50,432-word vocabulary runs ATen's generic kernels (4
passes, not 2), and its optimizer's foreach ops, whose long lists Kineto records without
shapes, get their elements from the gradients the step accumulated (the kernels' grids
gave a bound before 2026-12-05 afternoon)."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest

from kernelscope.analysis.diagnose import Analysis
from kernelscope.analysis.roofline import OpRoof
from kernelscope.protocol import OptimizerList

from support import FIXTURES
from support.recorded import analyzed

FOLDER = FIXTURES / "neox_train"
PARAMETERS = 70_557_696  # GPTNeoXConfig(vocab 50432, hidden 512, 6 layers, ffn 2048)
#: Its AdamW's one list as the worker counts it since 2026-12-05 (worker/program/optimizers.py,
#: run on the CPU over seventh.py's neox_train_inputs with transformers 4.x: 76 tensors,
#: 1126 chunks of at most 65,536 elements; the sidecar was recorded before the worker did).
ADAMW_LIST = OptimizerList("AdamW", "cuda:0", "float32", 76, PARAMETERS, 1126)
LOGITS = 4096 * 50432 * 4  # 8 x 512 tokens, fp32 under autocast's log_softmax


@cache
def analysis(raw: bool) -> Analysis:
    """The live trace with its sidecar, or the raw trace alone, against the H200's datasheet."""
    return analyzed(FOLDER.name, raw)


def measured() -> dict[tuple[str, str], dict[str, Any]]:
    report = json.loads((FOLDER / "counters.json").read_text())
    return {(r["name"], r.get("shapes", "")): r for r in report["roofline"] if r.get("measured")}


def rows(raw: bool, prefix: str) -> list[OpRoof]:
    return [r for r in analysis(raw).roofline if r.name.startswith(prefix)]


@pytest.mark.parametrize("raw", [False, True])
def test_no_row_is_above_its_roof(raw: bool) -> None:
    over = [(r.name, r.efficiency) for r in analysis(raw).roofline if (r.efficiency or 0) > 1]
    assert not over


@pytest.mark.parametrize("raw", [False, True])
def test_log_softmax_rows_count_four_passes_and_agree_with_the_counters(raw: bool) -> None:
    truth = measured()
    softmax = rows(raw, "aten::_log_softmax")
    assert {r.name for r in softmax} == {"aten::_log_softmax", "aten::_log_softmax_backward_data"}
    for r in softmax:
        assert r.bytes_per_step == pytest.approx(4 * LOGITS)  # 3 reads and a write each
        assert r.bytes_per_step == pytest.approx(
            truth[(r.name, r.shapes)]["bytes_per_step"], rel=0.10
        )


@pytest.mark.parametrize("raw", [False, True])
def test_foreach_rows_are_exact_from_the_gradients_the_step_accumulated(raw: bool) -> None:
    """The sidecar was recorded before the worker counted the optimizer's list, and Kineto
    keeps the lists without shapes; but each of the step's 76 AccumulateGrad keeps its
    parameter's, and every foreach op ran their 1126 chunks as blocks: each row has the
    parameters' 70,557,696 elements, not the grids' bound of 73.8 M, in the live trace and
    the raw one alike, under what Nsight Compute measured in DRAM (L2 kept the rest)."""
    truth = measured()
    foreach = rows(raw, "aten::_foreach_")
    assert len(foreach) == 7
    for r in foreach:
        assert r.estimate != "grid" and r.bytes_per_step, r.name
        assert truth[(r.name, r.shapes)]["bytes_per_step"] <= r.bytes_per_step, r.name
        assert r.efficiency is None or r.efficiency <= 1.0
    (sqrt,) = [r for r in foreach if r.name == "aten::_foreach_sqrt"]
    assert sqrt.bytes_per_step == pytest.approx(8.0 * PARAMETERS)  # one fp32 list read, one written


@pytest.mark.parametrize("raw", [False, True])
def test_adamw_reads_the_gradients_it_squares_once(raw: bool) -> None:
    """``_foreach_addcmul_(exp_avg_sqs, grads, grads)``: 3 lists as its ``lerp_`` (Nsight
    Compute measured the two alike, 766 MB each), rated against HBM; the 4 lists its kernel
    is passed read 0.65 of their bound."""
    truth = measured()
    foreach = {r.name: r for r in rows(raw, "aten::_foreach_")}
    addcmul, lerp = foreach["aten::_foreach_addcmul_"], foreach["aten::_foreach_lerp_"]
    assert addcmul.bytes_per_step == pytest.approx(lerp.bytes_per_step)
    assert addcmul.efficiency is not None and addcmul.efficiency <= 1.0
    moved = truth[(addcmul.name, addcmul.shapes)]["bytes_per_step"]
    assert 0.8 <= moved / (addcmul.bytes_per_step or 0.0) <= 1.0


def test_with_the_optimizers_list_the_foreach_rows_are_exact() -> None:
    """In a live run the worker counts the optimizer's list: every foreach op of the step
    ran 1126 blocks, the list's chunks, so each row's elements are its 70,557,696
    parameters, rated as any row, as the gradients give them. Nsight Compute's DRAM bytes
    (what L2 kept not among them) read 0.8-1.0 of them."""
    truth = measured()
    lists = analyzed(FOLDER.name, optimizer_lists=[ADAMW_LIST]).roofline
    foreach = {r.name: r for r in lists if r.name.startswith("aten::_foreach_")}
    from_gradients = {r.name: r for r in rows(False, "aten::_foreach_")}
    assert len(foreach) == 7
    for name, r in foreach.items():
        assert r.estimate != "grid" and r.bytes_per_step, name
        assert r.bytes_per_step == pytest.approx(from_gradients[name].bytes_per_step), name
        moved = truth[(r.name, r.shapes)]["bytes_per_step"]
        assert 0.8 <= moved / r.bytes_per_step <= 1.0, name
        assert r.efficiency is not None and r.efficiency <= 1.0, name
    sqrt = foreach["aten::_foreach_sqrt"]
    assert sqrt.bytes_per_step == pytest.approx(8.0 * PARAMETERS)  # one list read, one written


def test_the_embeddings_backward_through_its_sort_agrees_with_the_counters() -> None:
    """4,096 token indices take the sorting path (cub's radix sort, the partial sums per
    segment and their scatter: 19 kernels), measured on an H100 with `--counters-match`
    (embedding_counters.json, docs/h200-run/thirteenth/session_g.sh): the live trace's row
    takes all 19 whole, and the model is within 1 % of them, raw and live."""
    import msgspec

    from kernelscope.analysis.diagnose import analyze, load_sidecar
    from kernelscope.analysis.trace_load import load_trace
    from kernelscope.protocol import Counters

    counters = msgspec.json.decode((FOLDER / "embedding_counters.json").read_bytes(), type=Counters)
    assert len(counters.kernels) == 19
    side = msgspec.structs.replace(load_sidecar(FOLDER / "sidecar.json"), counters=counters)
    live = analyze(load_trace(FOLDER / "trace.json.gz"), side).roofline
    (row,) = [r for r in live if r.measured]
    assert row.name == "aten::embedding_dense_backward"
    for raw in (False, True):
        (model,) = rows(raw, "aten::embedding_dense_backward")
        assert model.bytes_per_step == pytest.approx(row.bytes_per_step, rel=0.01)
