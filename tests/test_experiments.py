"""What-if experiments: the judging is pure (synthetic rounds), the measuring is the real
worker on CPU through `kernelscope try` (torch.compile builds with this machine's compiler;
CUDA Graphs and TF32 say why they are skipped)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernelscope.analysis.experiments import judge, paired_speedup, suggested
from kernelscope.analysis.verdict import Verdict
from kernelscope.protocol import TryFinished, VariantOutcome

WHAT_IF = Path(__file__).parent / "workloads" / "what_if.py"


def outcome(name: str, rounds: list[float], **fields: Any) -> VariantOutcome:
    return VariantOutcome(name=name, status="ok", rounds_us=rounds, **fields)


def test_a_variant_twice_as_fast_every_round_is_2x_with_a_tight_interval() -> None:
    speedup, low, high = paired_speedup([200.0, 210.0, 190.0] * 3, [100.0, 105.0, 95.0] * 3)
    assert speedup == pytest.approx(2.0)
    assert low == pytest.approx(2.0) and high == pytest.approx(2.0)


def test_noise_that_straddles_one_is_no_speedup() -> None:
    base = [100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0]
    var = [80.0, 125.0, 90.0, 115.0, 100.0, 85.0, 120.0]
    finished = TryFinished(
        job_id="j", device_type="cpu", device_name="cpu", method="perf_counter",
        baseline_rounds_us=base,
        variants=[outcome("compile", var, results="equal", one_time_s=3.2,
                          one_time_what="compile")],
    )  # fmt: skip
    e = judge(finished, "m.py", "f", 3)
    v = e.variants[0]
    assert v.ci_low is not None and v.ci_high is not None
    assert v.ci_low < 1.0 < v.ci_high and not v.faster
    assert e.best is None
    assert "within the noise" in v.summary and "3.2 s to compile" in v.summary


def test_the_best_is_faster_beyond_the_noise_and_equal_results_come_first() -> None:
    base = [100.0] * 8
    finished = TryFinished(
        job_id="j", device_type="cuda", device_name="NVIDIA H200", method="cuda_events",
        baseline_rounds_us=base,
        variants=[
            outcome("bf16", [30.0, 31.0] * 4, results="changed", max_rel_err=3e-3,
                    tolerance="rtol 0.0001, atol 1e-05 (float32)"),
            outcome("compile", [50.0, 52.0] * 4, results="equal", one_time_s=2.1,
                    one_time_what="compile"),
            VariantOutcome(name="graphs", status="failed", why="RuntimeError: boom", line=7),
            outcome("batch2", [150.0] * 8, items=2, results="not compared: other inputs"),
        ],
    )  # fmt: skip
    e = judge(finished, "m.py", "f", 3)
    by = {v.name: v for v in e.variants}
    assert e.best == "compile"  # bf16 is faster but changes results
    assert by["compile"].summary == (
        "torch.compile: 1.96× faster (measured, 2.1 s to compile), results equal"
    )
    assert by["bf16"].summary.startswith("bf16 autocast: 3.28× faster")
    assert "changes results (max rel err 3.0e-03" in by["bf16"].summary
    assert by["graphs"].summary == "CUDA Graphs: failed: RuntimeError: boom"
    assert by["batch2"].speedup == pytest.approx(100 * 2 / 150)
    assert "per item" in by["batch2"].summary


def test_what_a_verdict_suggests() -> None:
    overhead = Verdict(bound="overhead", summary="")
    compute32 = Verdict(bound="compute", summary="", matmul_dtype="float32")
    compute16 = Verdict(bound="compute", summary="", matmul_dtype="bfloat16")
    assert suggested(overhead, [], "cuda") == ["compile", "graphs", "batch2"]
    assert suggested(overhead, [], "cpu") == ["compile", "batch2"]
    assert suggested(compute32, ["aten::convolution"], "cuda") == [
        "tf32", "bf16", "channels_last", "batch2",
    ]  # fmt: skip
    assert suggested(compute16, [], "cuda") == ["batch2"]
    assert suggested(Verdict(bound="memory", summary=""), [], "cuda") == ["compile", "batch2"]
    assert suggested(Verdict(bound="host", summary=""), [], "cpu") == ["compile", "batch2"]


def run_try(spec: str, *args: str) -> tuple[int, dict[str, Any], str]:
    proc = subprocess.run(
        [sys.executable, "-m", "kernelscope", "try", spec, "--device", "cpu", "--json", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        check=False,
    )
    out = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return proc.returncode, out, proc.stderr


def test_try_on_cpu_measures_compile_and_says_why_the_others_cannot_run() -> None:
    rc, out, err = run_try(
        f"{WHAT_IF}::chain", "--variants", "compile,graphs,tf32,batch2", "--budget", "0.5"
    )
    assert rc == 0, err
    by = {v["name"]: v for v in out["variants"]}
    assert out["rounds"] >= 7 and out["baseline_us"] > 0
    c = by["compile"]
    assert c["status"] == "ok", c
    assert c["results"] == "equal" and c["one_time_what"] == "compile" and c["one_time_s"] > 0
    assert c["ci_low"] <= c["speedup"] <= c["ci_high"]
    for name in ("graphs", "tf32"):
        assert by[name]["status"] == "skipped" and "needs a CUDA device" in by[name]["why"]
    assert by["batch2"]["items"] == 2
    assert by["batch2"]["results"] == "not compared: other inputs"


def test_bf16_autocast_changes_a_matmuls_results_and_says_by_how_much() -> None:
    rc, out, err = run_try(f"{WHAT_IF}::product", "--variants", "bf16", "--budget", "0.2")
    assert rc == 0, err
    v = out["variants"][0]
    assert v["results"] == "changed" and v["max_rel_err"] > 1e-4, v
    assert "changes results" in v["summary"] and "float32" in v["tolerance"]


def test_a_variant_that_fails_names_the_users_line_and_the_others_still_run() -> None:
    rc, out, err = run_try(f"{WHAT_IF}::doubled", "--variants", "bf16,batch2", "--budget", "0.2")
    assert rc == 0, err
    by = {v["name"]: v for v in out["variants"]}
    b = by["batch2"]
    assert b["status"] == "failed" and "takes batch_size 1 only" in b["why"]
    source = WHAT_IF.read_text().splitlines()
    assert b["path"] == str(WHAT_IF) and "raise ValueError" in source[b["line"] - 1]
    assert by["bf16"]["status"] == "ok"


def test_a_training_step_is_not_compared_and_channels_last_needs_a_4d_input() -> None:
    rc, out, err = run_try(
        f"{WHAT_IF}::step", "--variants", "bf16,channels_last", "--budget", "0.2"
    )
    assert rc == 0, err
    by = {v["name"]: v for v in out["variants"]}
    assert by["bf16"]["results"] == "not compared: the function's results change from call to call"
    assert by["channels_last"]["status"] == "skipped"
    rc, out, err = run_try(f"{WHAT_IF}::conv", "--variants", "channels_last", "--budget", "0.2")
    assert rc == 0, err
    cl = out["variants"][0]
    assert cl["status"] == "ok" and cl["results"] == "equal", cl


def test_bad_variant_is_a_usage_error() -> None:
    rc, _, err = run_try(f"{WHAT_IF}::chain", "--variants", "compile,warp")
    assert rc == 2 and "unknown variant 'warp'" in err
