"""The memory pass on a real H200 recording (fixtures/memory_gpt2/): a transformers GPT-2
training step with AdamW, bf16 autocast and checkpointed blocks, against a fresh process's
max_memory_allocated and the sizes its config gives; its batch forecast and checking run."""

from __future__ import annotations

import gzip
import json

import msgspec

from kernelscope.analysis.memory_fit import Forecast
from kernelscope.render.memory import memory_section, render_forecast
from kernelscope.report.schema import Report

from support import FIXTURES

FOLDER = FIXTURES / "memory_gpt2"
MiB = 2**20


def gpt2_parameters(
    layers: int = 6, width: int = 768, vocab: int = 50257, positions: int = 512
) -> int:
    """GPT2LMHeadModel's parameter count (the head shares the token embedding)."""
    block = (
        2 * width  # ln_1
        + width * 3 * width + 3 * width  # c_attn
        + width * width + width  # attn c_proj
        + 2 * width  # ln_2
        + width * 4 * width + 4 * width  # c_fc
        + 4 * width * width + width  # mlp c_proj
    )  # fmt: skip
    return vocab * width + positions * width + layers * block + 2 * width


def report() -> Report:
    raw = gzip.decompress((FOLDER / "report.memory.json.gz").read_bytes())
    return msgspec.json.decode(raw, type=Report)


def test_the_peak_is_a_fresh_processs_within_2_percent() -> None:
    meta = json.loads((FOLDER / "meta.json").read_text())
    m = report().memory_pass
    assert m is not None and not m.error
    truth = meta["truth"]["max_memory_allocated_mib"] * MiB
    assert abs(m.peak_allocated_bytes - truth) / truth < 0.02
    assert m.trace_peak_bytes <= m.peak_allocated_bytes


def test_parameters_gradients_and_adamw_state_are_the_configs_sizes() -> None:
    m = report().memory_pass
    assert m is not None
    params = 4 * gpt2_parameters()  # fp32 master weights; autocast casts copies
    assert m.kinds_after_call == {
        "parameters": params,
        "gradients": params,
        "optimizer_state": 2 * params,  # exp_avg, exp_avg_sq (the step counters are on the CPU)
    }
    assert m.baseline_kinds["parameters"] == params
    assert m.baseline_kinds["optimizer_state"] == 2 * params


def test_what_holds_the_peak_is_on_the_models_line_and_said_how() -> None:
    r = report()
    m = r.memory_pass
    assert m is not None
    top = max(m.lines, key=lambda row: row.live_at_peak_bytes)
    assert (top.path.rsplit("/", 1)[-1], top.line, top.via) == ("library.py", 20, "backward")
    assert m.kinds_at_peak["activations"] > 900 * MiB  # the checkpoints' inputs and the head's
    assert any("without Python stacks" in a for a in m.approximate)
    text = "\n".join(memory_section(m))
    assert (
        "after     parameters 311.0 MiB · gradients 311.0 MiB · optimizer state 621.9 MiB" in text
    )
    assert [f.code for f in r.findings if f.code == "KS131"] == ["KS131", "KS131"]


def test_the_forecast_was_checked_by_a_run_that_fit() -> None:
    f = msgspec.json.decode((FOLDER / "forecast.json").read_bytes(), type=Forecast)
    assert [p.batch_size for p in f.points] == [2, 4, 8]
    assert f.largest_batch == 55 and f.fits is True
    assert f.predicted is not None and f.checked_peak_bytes is not None
    assert abs(f.checked_peak_bytes - f.predicted) / f.predicted < 0.05
    assert "batch 55 ran" in render_forecast(f)
