"""The CLI as a user runs it: `kernelscope profile ... --json` and the human report, on CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from support import REPO_ROOT, WORKLOADS

KEYS = {
    "function": {"path", "qualname", "line"},
    "device": {"type", "name"},
    "runner": {"remote", "host", "python", "torch"},
    "steps": {"wait", "warmup", "active"},
    "timing": {"cpu_us_per_step", "cuda_us_per_step", "wall_us_per_step", "unprofiled_us_per_call"},
    "dead_window": {"first_call_us", "entry_to_first_kernel_us"},
    "trace": {"path"},
}


def kernelscope(
    *args: str, cwd: Path = REPO_ROOT, **extra_env: str
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **extra_env}
    if args and args[0] == "profile" and "--device" not in args:
        args = (*args, "--device", "cpu")  # the same results on a GPU host
    return subprocess.run(
        [sys.executable, "-m", "kernelscope", *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=180,
    )


def test_profile_json_has_the_documented_schema() -> None:
    proc = kernelscope(
        "profile",
        f"{WORKLOADS}/three_lines.py::three_lines",
        "--json",
        "--wait",
        "0",
        "--warmup",
        "1",
        "--active",
        "3",
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)  # exactly one JSON object
    for key, fields in KEYS.items():
        assert fields <= set(report[key]), (key, report[key])
    assert report["function"] == {
        "path": str(WORKLOADS / "three_lines.py"),
        "qualname": "three_lines",
        "line": 4,
    }
    assert report["steps"] == {
        "wait": 0,
        "warmup": 1,
        "active": 3,
        "asked": None,
        "recording": "",
        "fitted": "",
    }
    assert report["device"]["type"] == "cpu"
    import torch

    # torch's intra-op threads in the worker: what a CPU profile's times depend on
    assert report["device"]["threads"] == torch.get_num_threads()
    assert report["runner"]["remote"] is None
    op = next(o for o in report["ops"] if o["name"] == "aten::mm")
    assert {"name", "calls", "self_cpu_us", "cpu_total_us", "self_cuda_us", "cuda_total_us"} <= set(
        op
    )
    assert op["calls"] == 3 * 3  # three matmuls per call, three active steps
    top = report["lines"][0]
    assert {"path", "line", "self_cpu_us", "cpu_total_us", "cuda_us"} <= set(top)
    assert top["line"] == 6
    assert Path(report["trace"]["path"]).is_file()
    assert report["timing"]["unprofiled_us_per_call"] > 0
    assert report["verdict"]["bound"] == "host"
    assert {"bound", "gpu_busy_fraction", "achieved_tflops", "achieved_gbps", "summary"} <= set(
        report["verdict"]
    )
    assert any(f["code"] == "KS104" for f in report["findings"])


def test_noisy_function_still_gives_valid_json() -> None:
    proc = kernelscope("profile", f"{WORKLOADS}/failures.py::noisy", "--json", "--active", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert "hello from a subprocess" in report["output"]
    assert report["output_truncated"] is True


def test_human_report_has_tables_and_trace_path() -> None:
    proc = kernelscope("profile", f"{WORKLOADS}/three_lines.py::three_lines", "--active", "2")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for words in (
        "kernelscope · three_lines",
        "ops (totals over 2 active steps)",
        "aten::mm",
        "costliest lines",
        "b = a @ a @ a @ a",
        "cold call",
        "unprofiled",
        "trace",
    ):
        assert words in out, words
    assert "active 2/5" not in proc.stderr  # progress goes to stderr, with the real counts
    assert "line attribution" in proc.stderr


def test_a_long_call_is_profiled_fewer_times_and_the_report_says_why() -> None:
    """Profiled with stacks, a call of seconds piles up the profiler's events (minGPT's
    Trainer.run: 17 GB, killed): the worker profiles as many calls as fit in its budget,
    here 0.25 s against calls of 0.1 s, and the schedule line says so."""
    proc = kernelscope(
        "profile",
        f"{WORKLOADS}/long_call.py::slow_step",
        "--no-lines",
        "--no-memory",
        KERNELSCOPE_PROFILED_SECONDS="0.25",
    )
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("schedule"))
    assert line.startswith("schedule  wait 0 · warmup 1 · active 1  (asked 1 · 3 · 5: ")
    assert "each call takes 10" in line and line.endswith(
        ", and the profiled calls (warm-up and active) are kept within 0.25 s"
        " (KERNELSCOPE_PROFILED_SECONDS))"
    )
    assert "ops (totals over 1 active step" in proc.stdout
    assert "active 5/" not in proc.stderr and "active 2/2" in proc.stderr
    data = kernelscope(
        "profile",
        f"{WORKLOADS}/long_call.py::slow_step",
        "--json",
        "--no-lines",
        "--no-memory",
        KERNELSCOPE_PROFILED_SECONDS="0.25",
    )
    steps = json.loads(data.stdout)["steps"]
    assert steps["asked"] == [1, 3, 5] and steps["fitted"].startswith("each call takes 10")


def test_events_that_would_not_fit_in_memory_are_recorded_in_fewer_steps_or_refused() -> None:
    """The cold call counts the events one call makes (20,000 here: each ``x + 1`` is five
    ops); where the active steps' would not fit in the memory allowed (half the available,
    or KERNELSCOPE_PROFILER_GB), fewer are profiled, then without shapes, and the report says
    so; where not one call fits even so, the job is refused before the schedule runs, not
    killed in it."""
    spec = f"{WORKLOADS}/many_ops.py::many_adds"
    SCHEDULE = ("--wait", "0", "--warmup", "1", "--active", "3")

    def steps(gb: str) -> dict[str, Any]:
        proc = kernelscope(
            "profile", spec, "--json", "--no-lines", *SCHEDULE, KERNELSCOPE_PROFILER_GB=gb
        )
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["steps"]

    fewer = steps("0.8")  # 0.4 GB a call with shapes
    assert (fewer["active"], fewer["asked"]) == (1, [0, 1, 3])
    assert fewer["recording"].startswith("1 active step, not 3: one call makes 20,0")
    assert fewer["recording"].endswith("and more would take over the 0.8 GB allowed")
    assert fewer["fitted"] == ""  # the calls are short: their events, not their length
    plain = steps("0.3")  # 0.1 GB a call without
    assert plain["active"] == 2 and plain["recording"].startswith(
        "recorded without shapes (no FLOPs or bytes per op): one call makes 20,0"
    )
    assert steps("5")["recording"] == ""
    human = kernelscope("profile", spec, "--no-lines", *SCHEDULE, KERNELSCOPE_PROFILER_GB="0.8")
    lines = human.stdout.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("schedule"))
    assert lines[at] == "schedule  wait 0 · warmup 1 · active 1  (asked 0 · 1 · 3)"
    assert lines[at + 1].startswith("          1 active step, not 3: one call makes")
    refused = kernelscope("profile", spec, "--no-lines", *SCHEDULE, KERNELSCOPE_PROFILER_GB="0.05")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "One call makes 20,0" in refused.stderr and "GB allowed (half this" in refused.stderr
    assert "profile a smaller function that it calls" in refused.stderr


def test_verbose_report_and_json_give_every_stage_in_order() -> None:
    spec = f"{WORKLOADS}/three_lines.py::three_lines"
    text = kernelscope("profile", spec, "--active", "2", "-v")
    assert text.returncode == 0, text.stderr
    line = next(ln for ln in text.stdout.splitlines() if ln.startswith("stages"))
    names = ["worker start", "import", "inputs", "cold", "timing", "schedule", "export"]
    names += ["lines", "memory", "analysis"]  # a CPU call is not timed again in a clean worker
    positions = [line.index(f"{name} ") for name in names]
    assert positions == sorted(positions), line
    data = json.loads(kernelscope("profile", spec, "--active", "2", "--json").stdout)
    assert list(data["stages_s"]) == names
    assert all(seconds >= 0 for seconds in data["stages_s"].values())
    assert data["stages_s"]["worker start"] > 0.1  # a fresh CLI starts its worker


def test_user_error_is_short_and_has_no_kernelscope_traceback() -> None:
    proc = kernelscope("profile", f"{WORKLOADS}/failures.py::raises")
    assert proc.returncode == 1
    assert "ValueError: bad shape (3,)" in proc.stderr
    assert "failures.py:10" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_missing_inputs_hint_is_a_provider_stub() -> None:
    proc = kernelscope("profile", f"{WORKLOADS}/three_lines.py::needs_inputs")
    assert proc.returncode == 1
    assert 'def needs_inputs_inputs(batch_size: int = 1, device: str = "cpu"):' in proc.stderr
    assert "x = torch.randn(" in proc.stderr and "k = 1" in proc.stderr


def test_json_error_object_for_failures() -> None:
    proc = kernelscope("profile", f"{WORKLOADS}/three_lines.py::needs_inputs", "--json")
    assert proc.returncode == 1
    error = json.loads(proc.stdout)["error"]
    assert error["kind"] == "missing_inputs"
    assert error["line"] == 33
    compile(error["hint"], "stub", "exec")


def test_analyze_replays_a_recorded_gpu_run() -> None:
    trace = REPO_ROOT / "fixtures" / "matmul_add_8192" / "trace.json.gz"
    proc = kernelscope("analyze", str(trace), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["function"]["qualname"] == "matmul_add"
    assert report["verdict"]["bound"] == "compute"
    assert report["dead_window"]["entry_to_first_kernel_us"] > 10_000
    bare = json.loads(kernelscope("analyze", str(trace), "--json", "--trace-only").stdout)
    assert bare["verdict"]["bound"] == "compute"
    assert bare["dead_window"]["entry_to_first_kernel_us"] < 1_000  # first warm step
    human = kernelscope("analyze", str(trace)).stdout
    assert "verdict     compute-bound" in human


def test_calibrate_without_a_gpu_says_so() -> None:
    proc = kernelscope("calibrate", "--device", "cpu")
    assert proc.returncode == 1
    assert "calibrate measures GPU ceilings" in proc.stderr


def test_usage_errors_exit_2() -> None:
    for args in (
        ["profile", "no_colons.py"],
        ["profile", "missing.py::f"],
        ["profile", f"{WORKLOADS}/three_lines.py::f", "--active", "0"],
        ["profile", f"{WORKLOADS}/three_lines.py::f", "--timeout", "-1"],
    ):
        proc = kernelscope(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.startswith(("kernelscope:", "usage:")), proc.stderr
        assert "Traceback" not in proc.stderr


def test_missing_interpreter_is_a_clear_error() -> None:
    proc = kernelscope(
        "profile", f"{WORKLOADS}/three_lines.py::three_lines", "--python", "/nonexistent/python3"
    )
    assert proc.returncode == 1
    assert "cannot start /nonexistent/python3" in proc.stderr


def test_interpreter_without_torch_is_a_clear_error(tmp_path: Path) -> None:
    venv = tmp_path / "notorch"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    proc = kernelscope(
        "profile",
        f"{WORKLOADS}/three_lines.py::three_lines",
        "--python",
        str(venv / "bin" / "python"),
    )
    assert proc.returncode == 1
    assert "torch is not importable" in proc.stderr
    assert "pip install torch" in proc.stderr


NOISY_MODEL = """import torch

print("number of parameters: 10.65M")


class Block(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = torch.nn.Linear(n, n)

    def forward(self, x):
        print("inside forward")
        return self.lin(x)


class Broken(Block):
    def forward(self, x):
        return self.lin(x)
"""
NOISY_INPUTS = """import torch
from model import Block


def Block_forward_inputs(batch_size: int = 1):
    print("provider: building Block(8)")
    return (Block(8), torch.ones(batch_size, 8))


def Broken_forward_inputs(batch_size: int = 1):
    print("provider: about to fail")
    raise ValueError("no data here")
"""


def test_function_output_apart_from_import_and_provider(tmp_path: Path) -> None:
    """What the import and the provider print (nanoGPT's "number of parameters") is kept
    apart from what the function prints, each under its own heading; the run names its
    provider."""
    (tmp_path / "model.py").write_text(NOISY_MODEL)
    (tmp_path / "kernelscope_inputs.py").write_text(NOISY_INPUTS)
    spec = "model.py::Block.forward"
    proc = kernelscope("profile", spec, "--active", "1", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["inputs_from"] == "kernelscope_inputs.py::Block_forward_inputs"
    assert "number of parameters: 10.65M" in report["setup_output"]
    assert "provider: building Block(8)" in report["setup_output"]
    assert "inside forward" not in report["setup_output"]
    assert set(report["output"].splitlines()) == {"inside forward"}

    text = kernelscope("profile", spec, "--active", "1", cwd=tmp_path)
    assert text.returncode == 0, text.stderr[-2000:]
    out = text.stdout
    assert "called    alone, inputs from kernelscope_inputs.py::Block_forward_inputs" in out
    setup = out[out.index("printed by the import and the input provider, before the call") :]
    setup_lines = setup[: setup.index("\n\n")].splitlines()[1:]
    assert "  number of parameters: 10.65M" in setup_lines
    assert "  provider: building Block(8)" in setup_lines
    function = out[out.index("output of the function (last") :]
    assert set(function[: function.index("\n\n")].splitlines()[1:]) == {"  inside forward"}

    failed = kernelscope("profile", "model.py::Broken.forward", "--active", "1", cwd=tmp_path)
    assert failed.returncode != 0
    said = failed.stderr + failed.stdout
    assert "no data here" in said
    assert "printed by the import and the input provider, before the call (last lines):" in said
    assert "provider: about to fail" in said
    assert "output of the function" not in said
