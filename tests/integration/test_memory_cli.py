"""`kernelscope memory` and the memory pass in `profile --json`, as a user runs them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from support import REPO_ROOT, WORKLOADS

TRAIN = f"{WORKLOADS}/memory_train.py::train_step"


def run(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kernelscope", *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "KINETO_LOG_LEVEL": "99"},
        timeout=400,
    )


def test_the_forecast_batch_is_checked_by_running_it() -> None:
    proc = run("memory", TRAIN, "--device", "cpu", "--batch-sizes", "16,32", "--room", "24M",
               "--headroom", "0.1", "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [p["batch_size"] for p in out["points"]] == [16, 32]
    assert out["model"] == "runs of the call"
    assert out["budget_bytes"] == int(24 * 2**20 * 0.9)
    assert out["predicted"] <= out["budget_bytes"]
    # the run at the forecast batch lands where the call's own curve said
    assert abs(out["checked_peak_bytes"] - out["predicted"]) <= 0.05 * out["predicted"]
    assert out["fits"] is True
    # 16 and 32 peak in AdamW's step; the forecast batch peaks in the activations
    assert out["not_linear"]


def test_will_batch_n_fit_runs_n_when_it_is_predicted_to_fit() -> None:
    args = ("memory", TRAIN, "--device", "cpu", "--batch-sizes", "16,32", "--room", "24M")
    fits = json.loads(run(*args, "--will-fit", "64", "--json").stdout)
    assert fits["asked_batch"] == 64 and fits["asked_fits"] is True
    assert fits["check"].startswith("batch 64 ran: peak ")  # N itself, not the largest
    assert (
        abs(fits["checked_peak_bytes"] - fits["asked_predicted"]) <= 0.1 * fits["asked_predicted"]
    )
    assert fits["fits"] is True
    # far past the forecast batch: predicted not to fit, and not run to find out
    proc = run(*args, "--will-fit", "4096")
    assert proc.returncode == 0, proc.stderr
    assert "asked        batch 4096 does not fit: predicted peak " in proc.stdout
    assert "checked" not in proc.stdout


def test_profile_writes_the_memory_timeline_beside_the_trace(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'mem-timeline'\n")
    shutil.copy(WORKLOADS / "memory_train.py", tmp_path / "memory_train.py")
    proc = run("profile", "memory_train.py::train_step", "--device", "cpu", "--no-lines",
               "--active", "1", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    line = next(t for t in proc.stdout.splitlines() if t.startswith("memory      "))
    png, perfetto = (tmp_path / p for p in line.split()[1::3])
    assert png.name.endswith(".memory.png") and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    counters = [e for e in json.loads(perfetto.read_text())["traceEvents"] if e["ph"] == "C"]
    assert counters and all(e["name"] == "allocated" for e in counters)


def test_profile_json_carries_the_memory_pass_and_no_memory_drops_it() -> None:
    args = ("profile", TRAIN, "--device", "cpu", "--no-lines", "--json", "--active", "1")
    report = json.loads(run(*args).stdout)
    m = report["memory_pass"]
    assert m["source"] == "profiler memory events (CPU)"
    assert {"parameters", "gradients", "optimizer_state"} <= set(m["baseline_kinds"])
    assert any(row["via"] == "backward" for row in m["lines"])
    assert json.loads(run(*args, "--no-memory").stdout).get("memory_pass") is None


def test_bad_options_get_a_message_not_a_traceback() -> None:
    for bad, says in (
        (("--batch-sizes", "4"), "at least two different batch sizes"),
        (("--headroom", "1.5"), "headroom"),
        (("--room", "lots"), "expected a size"),
    ):
        proc = run("memory", TRAIN, "--device", "cpu", *bad)
        assert proc.returncode == 2, proc.stderr
        assert says in proc.stderr and "Traceback" not in proc.stderr
    proc = run("memory", f"{WORKLOADS}/three_lines.py::three_lines", "--device", "cpu")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "provider" in proc.stderr or "inputs" in proc.stderr


def test_diff_says_the_memory_peak_grew_with_the_batch(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'mem-diff'\n")
    shutil.copy(WORKLOADS / "memory_train.py", tmp_path / "train.py")
    spec = f"{tmp_path}/train.py::train_step"
    for batch in ("64", "512"):
        done = run("profile", spec, "--device", "cpu", "--no-lines", "--active", "1",
                   "--batch-size", batch, cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr
    proc = run("diff", spec, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    memory = json.loads(proc.stdout)["memory"]
    assert memory["regression"] and memory["peak_after_bytes"] > memory["peak_before_bytes"]
    assert "a memory regression" in run("diff", spec, cwd=tmp_path).stdout
