"""Whisper-tiny's training step under bf16 autocast with AdamW (fixtures/whisper_counters: a
live profile on an H100 with --counters-match for its layer norms, softmaxes, cats and
embeddings' backward). Every row Nsight Compute measured, of a megabyte or more, is checked
against the model of the same run's trace: within 20 %. Layer norm's backward was outside
until 2026-12-05 (0.59 of measured: its second kernel, GammaBetaBackward, reads the incoming
gradient and the input again); the model now counts both kernels (costs/normalization.py)."""

from __future__ import annotations

from typing import Any

import pytest

from kernelscope.analysis.costs.per_op import op_bytes
from kernelscope.analysis.roofline import OpRoof
from kernelscope.analysis.trace_model import OpInputs

from support import FIXTURES
from support.counted import measured_rows, trace_rows

FOLDER = FIXTURES / "whisper_counters"
MEGABYTE = 1e6


def rows() -> tuple[OpRoof, ...]:
    return trace_rows(FOLDER / "live.json.gz")


def measured() -> list[dict[str, Any]]:
    return measured_rows(FOLDER / "counters.json")


def test_no_row_is_above_its_roof() -> None:
    assert max(r.efficiency or 0 for r in rows()) <= 1.0


def test_every_measured_row_agrees_with_the_model() -> None:
    model = {(r.name, r.shapes): r.bytes_per_step or 0.0 for r in rows()}
    checked = []
    for m in measured():
        if m["bytes_per_step"] < MEGABYTE:
            continue
        key = (m["name"], m["shapes"])
        assert model[key] == pytest.approx(m["bytes_per_step"], rel=0.20), key
        checked.append(key[0])
    assert len(checked) == 9 and checked.count("aten::native_layer_norm_backward") == 2


def test_layer_norms_backward_reads_its_inputs_twice_where_weights_learn() -> None:
    """Both kernels read dy and x (fp32 8x1500x384, 18.4 MB each); the first writes dx. With
    output_mask [True, False, False] (no weight or bias gradient) only the first runs."""
    n = 8 * 1500 * 384

    def call(mask: str) -> float:
        dims = [[8, 1500, 384], [8, 1500, 384], [], [8, 1500, 1], [8, 1500, 1], [384], [384], []]
        types = ["float", "float", "ScalarList", "float", "float", "float", "float", "ScalarList"]
        concrete = ["", "", "[384]", "", "", "", "", mask]
        return op_bytes("aten::native_layer_norm_backward", OpInputs(dims, types), concrete)

    small = 2 * 8 * 1500 * 4 + 2 * 384 * 4  # mean, rstd, weight, bias
    assert call("[True, True, True]") == 5 * n * 4 + small
    assert call("[True, False, False]") == 3 * n * 4 + small
    for m in measured():
        if m["name"] == "aten::native_layer_norm_backward" and m["shapes"].startswith("8×1500"):
            assert m["bytes_per_step"] == pytest.approx(9 * call("[True, True, True]"), rel=0.03)
