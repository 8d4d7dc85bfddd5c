"""`kernelscope try` on CPU with the real worker: torch.compile builds with this machine's
compiler; CUDA Graphs and TF32 say why they are skipped; a failing variant names its line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from support import WORKLOADS

WHAT_IF = WORKLOADS / "what_if.py"
CHANGES = "not compared: the function's results change from call to call (its first two calls "


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
    # at least 7 rounds timed; those the host slowed are left out, while 3 and a quarter remain
    timed = out["rounds"] + out["slowed_rounds"]
    assert timed >= 7 and out["rounds"] >= max(3, timed // 4) and out["baseline_us"] > 0
    # judged against the loop the worker read at its start too: its thread's and that
    assert out["reference_us"] > 0 and out["host_reference_us"] > 0
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
    assert by["bf16"]["results"].startswith(CHANGES)
    assert by["channels_last"]["status"] == "skipped"
    rc, out, err = run_try(f"{WHAT_IF}::conv", "--variants", "channels_last", "--budget", "0.2")
    assert rc == 0, err
    cl = out["variants"][0]
    assert cl["status"] == "ok" and cl["results"] == "equal", cl


def test_bad_variant_is_a_usage_error() -> None:
    rc, _, err = run_try(f"{WHAT_IF}::chain", "--variants", "compile,warp")
    assert rc == 2 and "unknown variant 'warp'" in err


def test_a_variant_that_recompiles_on_every_call_is_a_failure() -> None:
    rc, out, err = run_try(f"{WHAT_IF}::recompiles", "--variants", "compile", "--budget", "0.2")
    assert rc == 0, err
    (v,) = out["variants"]
    assert v["status"] == "failed" and "compiled it again" in v["why"], v


def test_channels_last_copies_the_model_its_optimizer_and_grad_scaler_together() -> None:
    """One deepcopy memo over the call's arguments: the copied optimizer holds the copied
    model's parameters, so ``scaler.step(opt)`` finds their gradients (copying the module
    alone failed with "No inf checks were recorded for this optimizer")."""
    rc, out, err = run_try(
        f"{WHAT_IF}::scaled_step", "--variants", "channels_last", "--budget", "0.2"
    )
    assert rc == 0, err
    (v,) = out["variants"]
    assert v["status"] == "ok", v
    assert v["results"].startswith(CHANGES)
    assert v["speedup"] > 0 and v["us_per_call"] > 0


def test_a_variant_failing_on_a_global_optimizer_names_it() -> None:
    """The optimizer and scaler are globals, the model an argument: the copy cannot take
    them along, and the failure says so with the user's names."""
    rc, out, err = run_try(
        f"{WHAT_IF}::global_opt_step", "--variants", "channels_last", "--budget", "0.2"
    )
    assert rc == 0, err
    (v,) = out["variants"]
    assert v["status"] == "failed", v
    assert "No inf checks" in v["why"]
    assert "copies of model (Sequential)" in v["why"]
    assert "GLOBAL_OPT (SGD)" in v["why"] and "GLOBAL_SCALER (GradScaler)" in v["why"]
    assert "pass it as an argument" in v["why"]
    source = WHAT_IF.read_text().splitlines()
    assert "GLOBAL_SCALER.step" in source[v["line"] - 1]


def test_a_function_left_failing_by_a_failed_variant_says_which_variant() -> None:
    rc, out, err = run_try(
        f"{WHAT_IF}::breaks_the_process", "--variants", "bf16", "--budget", "0.2"
    )
    assert rc != 0
    message = out["error"]["message"]
    assert "right after the bf16 variant failed in this process" in message, message
    assert "try again without it" in message and "state left broken" in message
    assert "Traceback" not in err


def test_a_variant_failing_in_the_timed_calls_is_failed_and_the_rest_still_timed() -> None:
    rc, out, err = run_try(f"{WHAT_IF}::fails_later", "--variants", "bf16", "--budget", "1")
    assert rc == 0, err
    (v,) = out["variants"]
    assert v["status"] == "failed" and v["why"].startswith("failed in the timed calls: "), v
    assert "ran out of something" in v["why"]
    assert out["baseline_us"] > 0
