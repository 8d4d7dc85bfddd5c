"""`kernelscope profile --via`: functions of a real training project (tests/workloads/minigpt:
a config file exec'd by the script, --key=value overrides, DataLoader workers, a module-level
`while True:` loop, an eval pass first, a pytest test) profiled as its programs call them,
with no harness code; and every way a program can fail to give the call, with its message."""

from __future__ import annotations

import gzip
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support import WORKLOADS

TRAIN = "train.py config/tiny.py --max_iters=3 --eval_interval=2 --device=cpu"
NO_TIME_FIT = {"KERNELSCOPE_PROFILED_SECONDS": "1000"}  # iterations slow on a busy host


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the project (its programs write out/), with a pyproject.toml of its own."""
    root = tmp_path_factory.mktemp("entries") / "minigpt"
    shutil.copytree(WORKLOADS / "minigpt", root, ignore=shutil.ignore_patterns("out"))
    (root / "pyproject.toml").write_text(
        "[project]\nname = 'minigpt'\n\n[tool.kernelscope.via]\n"
        f'"model.py::MLP.forward" = "{TRAIN}"\n'
    )
    return root


def kernelscope(
    cwd: Path, *args: str, command: str = "profile", **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kernelscope", command, *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        env=os.environ | env,
    )


def in_place_loop(project: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """train.py's `while True:` loop profiled in place, over 20 iterations, as JSON (--skip
    5 given: iterations 2-5 timed, whether or not they still speed up)."""
    loop = _line_of(project / "train.py", "while True:")
    command = TRAIN.replace("=3", "=20")
    return kernelscope(
        project, f"train.py:{loop}", "--via", command, "--skip", "5", "--json", **env
    )


def report(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def error(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode == 1, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)["error"]


def test_the_first_call_is_the_eval_pass(project: Path) -> None:
    """estimate_loss() runs before the loop: Block.forward's first call is in eval mode
    under no_grad, from GPT.forward's line in model.py."""
    out = report(kernelscope(project, "model.py::Block.forward", "--via", TRAIN, "--json"))
    site = out["call_site"]
    assert site["via"] == TRAIN
    assert site["call"] == 1 and site["captured"] is True
    assert site["modes"][:2] == ["eval mode", "no_grad"]
    assert Path(site["caller_path"]).name == "model.py"
    assert out["timing"]["unprofiled_us_per_call"] > 0
    assert out["lines"], "the line pass ran on the captured call"
    assert {Path(line["path"]).name for line in out["lines"]} >= {"model.py"}
    assert out["function"]["line"] > 0


def test_from_a_line_of_the_training_loop(project: Path) -> None:
    """--from names a line anywhere on the call's stack: the loop's model(X, Y), so the
    call counted is a training one (train mode, grad on)."""
    loop_line = _line_of(project / "train.py", "logits, loss = model(X, Y)")
    out = report(
        kernelscope(
            project,
            "model.py::Block.forward",
            "--via",
            TRAIN,
            "--from",
            f"train.py:{loop_line}",
            "--call",
            "3",
            "--json",
        )
    )
    site = out["call_site"]
    assert (Path(site["caller_path"]).name, site["caller_line"]) == ("train.py", loop_line)
    assert site["call"] == 3
    assert site["modes"] == ["train mode"]


def test_the_human_report_says_which_call_it_measured(project: Path) -> None:
    proc = kernelscope(project, "model.py::GPT.forward", "--via", TRAIN, "--no-lines")
    assert proc.returncode == 0, proc.stderr[-2000:]
    call = next(line for line in proc.stdout.splitlines() if line.startswith("call "))
    assert f"via {TRAIN}, call 1 from train.py:" in call
    assert "eval mode, no_grad, captured" in call
    lines = proc.stdout.splitlines()
    said = lines[lines.index(call) + 1].strip()  # a replay's caches are warm: say so
    assert said.startswith("timed replayed back to back, its caches warm from call to call")
    assert said.endswith("--in-place times the program's own calls")


def test_a_pytest_node_id(project: Path) -> None:
    out = report(
        kernelscope(project, "model.py::GPT.forward", "--via", "tests/test_model.py::test_forward",
                    "--json", "--no-lines")
    )  # fmt: skip
    assert out["call_site"]["via"] == "pytest tests/test_model.py::test_forward"
    assert Path(out["call_site"]["caller_path"]).name == "test_model.py"


def test_a_module_with_argparse_and_spawned_dataloader_workers(project: Path) -> None:
    """train_main.py: argparse options, a main guard, DataLoader workers started by spawn
    (they import the script again as __mp_main__ and unpickle its dataset)."""
    out = report(
        kernelscope(
            project,
            "train_main.py::train_step",
            "--via",
            "-m train_main --start_method spawn --num_workers 2 --max_iters 3 --device cpu",
            "--json",
            "--no-lines",
        )
    )
    assert out["call_site"]["via"] == (
        "-m train_main --start_method spawn --num_workers 2 --max_iters 3 --device cpu"
    )
    assert out["call_site"]["modes"] == ["train mode"]  # its first argument is the model


def test_the_program_mapped_in_pyproject(project: Path) -> None:
    out = report(kernelscope(project, "model.py::MLP.forward", "--json", "--no-lines"))
    assert out["call_site"]["via"] == TRAIN


def test_a_program_that_fails_before_the_call(project: Path) -> None:
    err = error(kernelscope(project, "model.py::MLP.forward", "--via", "train.py config/no.py",
                            "--json"))  # fmt: skip
    assert err["kind"] == "entry_failed"
    assert (
        "train.py config/no.py failed before calling MLP.forward: FileNotFoundError"
        in (err["message"])
    )
    assert (Path(err["path"]).name, err["line"]) == (
        "train.py",
        _line_of(project / "train.py", 'exec(open("configurator.py").read())'),
    )


def test_a_program_that_never_calls_the_function(project: Path) -> None:
    err = error(kernelscope(project, "model.py::GPT.generate", "--via", TRAIN, "--json"))
    assert err["kind"] == "not_called"
    assert err["message"].startswith(f"{TRAIN} ran to the end in ")
    assert err["message"].endswith("without calling GPT.generate; it ran for real and wrote "
                                   "out/ckpt.pt")  # fmt: skip
    # on its def line, not its decorator's (@torch.no_grad())
    assert (Path(err["path"]).name, err["line"]) == ("model.py", _def_line(project, "generate"))


def test_too_few_calls(project: Path) -> None:
    err = error(
        kernelscope(project, "model.py::GPT.forward", "--via", TRAIN, "--call", "999", "--json")
    )
    assert err["kind"] == "too_few_calls"
    assert "called GPT.forward" in err["message"]
    assert err["message"].endswith("the call asked for is number 999")
    assert "--call" in err["hint"]


def test_a_caller_that_never_calls_it(project: Path) -> None:
    err = error(
        kernelscope(
            project, "model.py::MLP.forward", "--via", TRAIN, "--from", "data.py:1", "--json"
        )
    )
    assert err["kind"] == "not_called"
    assert "none from data.py:1" in err["message"]
    assert "model.py:" in err["hint"]


def test_a_function_only_dataloader_workers_call(project: Path) -> None:
    """seed_worker (the loaders' worker_init_fn) runs only in forked DataLoader workers: its
    first call is taken there and replayed in the main process with the worker's
    WorkerInfo (it asserts get_worker_info() is its own) and its one thread."""
    out = report(kernelscope(project, "data.py::seed_worker", "--via", TRAIN, "--json"))
    modes = out["call_site"]["modes"]
    assert any(m.startswith("made in DataLoader worker") for m in modes), modes
    assert out["device"]["threads"] == 1


def test_a_dataset_item_taken_in_a_worker(project: Path) -> None:
    """CharDataset.__getitem__'s first call is a forked worker's (the eval pass asks the
    train loader first), though the main process calls it too (the val loader has none)."""
    out = report(kernelscope(project, "data.py::CharDataset.__getitem__", "--via", TRAIN, "--json"))
    site = out["call_site"]
    assert any(m.startswith("made in DataLoader worker") for m in site["modes"]), site
    assert site["saved"], site["save_error"]  # a module's class: kept, to replay


def test_in_place_a_module_level_while_loop(project: Path) -> None:
    """train.py's `while True:` at module level: its iterations are the steps, with the
    program's own batches (fork DataLoader workers), gradient accumulation and eval."""
    loop = _line_of(project / "train.py", "while True:")
    out = report(in_place_loop(project, **NO_TIME_FIT))
    site = out["call_site"]
    assert site["captured"] is False
    assert site["modes"] == ["iterations 6-14 profiled, 10-14 active"]
    assert site["step"] == "iteration"
    assert out["function"]["line"] == loop
    process = out["timing"]["unprofiled_process"]
    assert process == "before the profiler started, in a worker that never profiled"
    # the script's own loop marks its iterations (loop_mark.py): no tracer, on any Python
    assert out["timing"]["unprofiled_traced"] == ""
    assert out["timing"]["unprofiled_reps"] == 4  # iterations 2-5; the first is the cold one
    start, end = out["timing"]["unprofiled_window_s"]  # iteration 2's begin to 5's end
    assert 0 < end - start < out["call_site"]["entry_s"]
    assert out["lines"] == []  # no line pass in place
    assert "step 12: train loss" in out["output"]  # the program's own output is there ...
    assert "Python replay stack is empty" not in out["output"]  # ... not the profiler's warning
    names = {o["name"] for o in out["ops"]}
    assert "Optimizer.step#AdamW.step" in names  # the whole iteration: the optimizer too


def test_in_place_a_loop_in_an_imported_module_marks_itself(project: Path) -> None:
    """GPT.forward's `for block in self.blocks:` (model.py, imported by train.py, not
    compiled by the worker): each block is an iteration, found by sys.monitoring from 3.12
    and before it marked as train.py imports model.py (loop_mark.MarkingImport): no tracer
    slows the steps, and the host's speed is read beside them."""
    loop = _line_of(project / "model.py", "for block in self.blocks:")
    command = TRAIN.replace("=3", "=20")
    cached = sorted((project / "__pycache__").glob("model.*.pyc"))
    out = report(kernelscope(project, f"model.py:{loop}", "--via", command, "--json"))
    assert out["call_site"]["step"] == "iteration"
    assert out["function"]["line"] == loop
    assert out["timing"]["unprofiled_traced"] == ""
    assert out["timing"]["unprofiled_reference_us"] > 0
    # the marked code was not cached: the next plain import gets the file as it is
    assert sorted((project / "__pycache__").glob("model.*.pyc")) == cached


def test_in_place_long_iterations_are_profiled_fewer_times(project: Path) -> None:
    """Iterations longer than the profiled budget allows: the wait step (it counts the
    events), no warm-up, one active step, and the schedule says why (an epoch-long iteration
    piles up events)."""
    out = report(in_place_loop(project, KERNELSCOPE_PROFILED_SECONDS="0.000001"))
    # iteration 6 is the wait step kept to count the events an iteration makes
    assert out["call_site"]["modes"] == ["iterations 6-7 profiled, 7-7 active"]
    steps = out["steps"]
    assert (steps["wait"], steps["warmup"], steps["active"]) == (1, 0, 1)
    assert steps["asked"] == [1, 3, 5]
    assert steps["fitted"].startswith("each iteration takes ")
    assert "one active step alone" in steps["fitted"]
    assert out["timing"]["unprofiled_reps"] == 4


def test_in_place_the_events_of_an_iteration_are_weighed_before_the_schedule(
    project: Path,
) -> None:
    """The wait step counts the events one iteration makes under a light profiler; where the
    active steps' would not fit in the memory allowed, they are recorded without shapes (or
    fewer), and where not one fits, the job is refused before the schedule, not killed."""
    err = error(in_place_loop(project, KERNELSCOPE_PROFILER_GB="1e-6", **NO_TIME_FIT))
    assert err["kind"] == "trace_too_large"
    made = re.search(
        r"One iteration makes ([\d,]+) profiler events \(a counting step\)", err["message"]
    )
    assert made is not None, err["message"]
    events = int(made[1].replace(",", ""))
    gb = f"{events * 12_000 / 1e9:.6f}"  # two steps without shapes (5 KB), none with (20 KB)
    out = report(in_place_loop(project, KERNELSCOPE_PROFILER_GB=gb, **NO_TIME_FIT))
    steps = out["steps"]
    assert (steps["wait"], steps["warmup"], steps["active"]) == (1, 3, 2)
    assert steps["recording"].startswith("recorded without shapes (no FLOPs or bytes per op): ")
    assert re.search(r"one iteration makes [\d,]+ profiler events", steps["recording"])
    assert steps["recording"].endswith("; and 2 active steps, not 5")
    assert out["call_site"]["modes"] == ["iterations 6-11 profiled, 10-11 active"]
    trace = gzip.decompress((project / out["trace"]["path"]).read_bytes())
    assert b'"Optimizer.step#AdamW.step"' in trace and b'"Input Dims"' not in trace


def test_in_place_the_dataloader_workers_leave_no_temporary_folders(
    project: Path, tmp_path: Path
) -> None:
    """The worker ends after an in-place job, terminating the program's forked DataLoader
    workers: each had made a pymp-* folder for the socket it sends batches by, and left it
    behind (two per job), as a finished program's own workers do not."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    report(in_place_loop(project, TMPDIR=str(temp), **NO_TIME_FIT))
    assert sorted(p.name for p in temp.glob("pymp-*")) == []


COMPILED_MODEL = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(64, 64) for _ in range(4))

    def forward(self, x):
        for block in self.blocks:
            x = torch.relu(block(x))
        return x.sum()
"""

COMPILING = """import torch

from model import Net

net = Net()
step = torch.compile(net, backend="eager")
for _ in range(40):
    step(torch.randn(32, 64)).backward()
"""


def test_a_loop_inside_a_compiled_function_says_so(tmp_path: Path) -> None:
    """Its iterations run in the compiled graph: none is seen, and the message says why and
    what to profile instead, not "run the program longer"."""
    (tmp_path / "model.py").write_text(COMPILED_MODEL)
    (tmp_path / "train.py").write_text(COMPILING)
    loop = _line_of(tmp_path / "model.py", "for block in self.blocks:")
    err = error(kernelscope(tmp_path, f"model.py:{loop}", "--via", "train.py", "--json"))
    assert err["kind"] == "too_few_calls"
    assert err["message"].startswith(f"train.py made 0 iterations of the loop at line {loop}")
    assert err["message"].endswith(
        "; the loop is in Net.forward, which torch.compile compiled: its iterations run in the "
        "compiled graph, not as Python"
    )
    assert err["hint"].startswith("profile the compiled function's calls instead "
                                  "(model.py::Net.forward --in-place)")  # fmt: skip


SPAWNING = """import sys

import torch
from torch.utils.data import DataLoader, TensorDataset


def step(x):
    return x.sum()


if __name__ == "__main__":
    data = TensorDataset(torch.randn(512, 8))
    for (x,) in DataLoader(data, batch_size=8, num_workers=2, multiprocessing_context=sys.argv[1]):
        step(x)
"""


@pytest.mark.parametrize("start", ["spawn", "forkserver"])
def test_spawned_dataloader_workers_leave_no_temporary_folders(tmp_path: Path, start: str) -> None:
    """Started by spawn or forkserver (Python 3.14's default), the workers get the worker's
    temporary folder with the pickled process object, as forked ones inherit it."""
    (tmp_path / "spawning.py").write_text(SPAWNING)
    temp = tmp_path / "tmp"
    temp.mkdir()
    via = f"spawning.py {start}"
    args = ("spawning.py::step", "--via", via, "--in-place", "--skip", "3", "--json")
    report(kernelscope(tmp_path, *args, TMPDIR=str(temp), **NO_TIME_FIT))
    assert sorted(p.name for p in temp.glob("pymp-*")) == []


PAUSING = """import time

import torch


def step(x):
    return (x @ x).sum()


x = torch.randn(64, 64)
for _ in range(40):
    step(x)
    time.sleep(0.02)  # the rest of the program's iteration
"""


def test_in_place_a_calls_wall_is_its_own_not_the_time_between_calls(tmp_path: Path) -> None:
    """The active window also holds the program between the calls (here a 20 ms sleep):
    the wall per step is each call's own."""
    (tmp_path / "pausing.py").write_text(PAUSING)
    out = report(kernelscope(tmp_path, "pausing.py::step", "--via", "pausing.py", "--in-place",
                             "--skip", "3", "--json", **NO_TIME_FIT))  # fmt: skip
    timing = out["timing"]
    assert out["call_site"]["modes"] == ["calls 4-12 profiled, 8-12 active"]
    assert timing["wall_us_per_step"] < 10_000, timing  # it read the 20 ms pauses
    assert timing["wall_us_per_step"] >= 0.5 * timing["cpu_us_per_step"]


def test_in_place_a_functions_calls(project: Path) -> None:
    out = report(
        kernelscope(
            project,
            "train_main.py::train_step",
            "--via",
            "train_main.py --max_iters 20 --device cpu --num_workers 0",
            "--in-place",
            "--skip",
            "3",
            "--json",
            **NO_TIME_FIT,
        )
    )
    assert out["call_site"]["modes"] == ["calls 4-12 profiled, 8-12 active"]
    assert out["timing"]["unprofiled_reps"] == 2
    # before 3.12 the tracer that found the first call was swapped for a trampoline on
    # train_step after it: the timed calls ran untraced (worker/program/trampoline.py)
    assert out["timing"]["unprofiled_traced"] == ""
    # the optimizer that stepped in the first call: its two groups (decay, no decay) a list each
    sidecar = json.loads(
        Path(out["trace"]["path"].replace(".pt.trace.json.gz", ".sidecar.json")).read_text()
    )
    lists = sidecar["optimizer_lists"]
    assert [(x["optimizer"], x["device"], x["dtype"]) for x in lists] == [
        ("AdamW", "cpu", "float32")
    ] * 2
    decay, no_decay = lists
    assert decay["chunks"] >= decay["tensors"] > 0 and no_decay["tensors"] > 0


def test_in_place_the_program_runs_to_its_end_with_no_stop_after(project: Path) -> None:
    shutil.rmtree(project / "out", ignore_errors=True)
    command = "train_main.py --max_iters 20 --device cpu --num_workers 0"
    spec = "train_main.py::train_step"
    stopped = report(
        kernelscope(
            project, spec, "--via", command, "--in-place", "--skip", "5", "--json", **NO_TIME_FIT
        )
    )
    assert stopped["call_site"]["modes"] == ["calls 6-14 profiled, 10-14 active"]
    assert not (project / "out" / "ckpt.pt").exists()  # stopped after call 14 of 21
    out = report(
        kernelscope(
            project,
            spec,
            "--via",
            command,
            "--in-place",
            "--skip",
            "5",
            "--no-stop-after",
            "--json",
            **NO_TIME_FIT,
        )
    )
    first, then = out["call_site"]["modes"]
    assert first == "calls 6-14 profiled, 10-14 active"
    assert then.startswith("then the program ran to its end (")
    assert (project / "out" / "ckpt.pt").is_file()  # its last lines ran: the checkpoint
    assert "saved out/ckpt.pt" in out["output"]
    assert out["call_site"]["wrote"] == ["out/ckpt.pt"]  # the report says it ran for real
    assert stopped["call_site"]["wrote"] == []


@pytest.mark.parametrize("via", [TRAIN, f"-m {TRAIN.replace('.py', '', 1)}"])
def test_in_place_with_too_few_iterations(project: Path, via: str) -> None:
    """The script's loop ends after 4 iterations: a loop of the module's own code never runs
    again, so the job fails there, before the program's last lines (its checkpoint); run as
    its script (the loop marks itself before 3.12) or as a module (the tracer finds it)."""
    shutil.rmtree(project / "out", ignore_errors=True)
    loop = _line_of(project / "train.py", "while True:")
    err = error(kernelscope(project, f"train.py:{loop}", "--via", via, "--json"))
    assert err["kind"] == "too_few_calls"
    assert f"made 4 iterations of the loop at line {loop}" in err["message"]
    assert "in place needs 14 (--skip 5, then 9 profiled)" in err["message"]
    assert not (project / "out" / "ckpt.pt").exists()


def test_in_place_a_loop_run_again_ends_its_last_iteration_where_it_exits(
    project: Path,
) -> None:
    """estimate_loss()'s `for k in range(eval_iters)`: 2 iterations a run, two runs a call,
    and two training steps between its calls. The iteration before each exit ends there:
    no step holds the training steps that ran before the loop's next run."""
    loop = _line_of(project / "train.py", "for k in range(eval_iters):")
    command = TRAIN.replace("=3", "=30")
    out = report(kernelscope(project, f"train.py:{loop}", "--via", command, "--skip", "5",
                             "--json", **NO_TIME_FIT))  # fmt: skip
    # estimate_loss() is @torch.no_grad(): every iteration ran without autograd
    assert out["call_site"]["modes"] == ["iterations 6-14 profiled, 10-14 active", "no_grad"]
    names = {op["name"] for op in out["ops"]}
    assert "aten::embedding" in names  # the eval's forward
    assert not {n for n in names if "Optimizer" in n or "backward" in n.lower()}, names


def test_in_place_skip_1_times_no_call_and_claims_no_figure(project: Path) -> None:
    """--skip 1 profiles from the second iteration: none is timed without the profiler, so
    the report has no unprofiled figure (the cold call is the first iteration's)."""
    loop = _line_of(project / "train.py", "for k in range(eval_iters):")
    command = TRAIN.replace("=3", "=30")
    out = report(kernelscope(project, f"train.py:{loop}", "--via", command, "--skip", "1",
                             "--json", **NO_TIME_FIT))  # fmt: skip
    t = out["timing"]
    assert (t["unprofiled_reps"], t["unprofiled_us_per_call"], t["unprofiled_method"]) == (
        0,
        0.0,
        "none",
    )
    assert out["dead_window"]["first_call_us"] > 0
    assert "KS601" not in {f["code"] for f in out["findings"]}


def test_our_own_output_redirected_into_the_programs_folder_is_not_what_it_wrote(
    project: Path,
) -> None:
    """`kernelscope ... > ks.json 2> ks.err` in the program's folder: those files change as
    it runs, by our hand, not the program's ("it ran for real and wrote ks.err" was said)."""
    loop = _line_of(project / "train.py", "for k in range(eval_iters):")
    command = TRAIN.replace("=3", "=30")
    line = shlex.join([sys.executable, "-m", "kernelscope", "profile", f"train.py:{loop}",
                       "--via", command, "--json", "--no-lines"])  # fmt: skip
    subprocess.run(f"{line} > ks.json 2> ks.err", shell=True, cwd=project, timeout=300,
                   check=True, env=os.environ | NO_TIME_FIT)  # fmt: skip
    out = json.loads((project / "ks.json").read_text())
    assert out["call_site"]["wrote"] == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--via", "nope.py"], "no such script nope.py"),
        (["--via", "torchrun --nnodes 2 train.py"], "kernelscope runs the ranks of one host"),
        (["--via", "torchrun --nproc-per-node 2 train.py", "--nproc", "3"], "disagree"),
        (["--via", "torchrun --nproc-per-node 2 train.py", "--save"], "runs on ranks"),
        (["--via", "torchrun --nproc-per-node gpu train.py"], "give the number of ranks"),
        (["--via", "accelerate env"], "only `accelerate launch [options] script.py ...`"),
        (["--call", "2"], "need a program (--via)"),
        (["--via", TRAIN, "--from", "train.py"], "--from takes FILE:LINE"),
        (["--via", "tests/test_nope.py::test_x"], "no such test file tests/test_nope.py"),
        (["--in-place"], "need a program (--via)"),
        (["--via", TRAIN, "--in-place", "--call", "2"], "--call does not apply"),
        (["--via", TRAIN, "--no-stop-after"], "--no-stop-after needs --in-place"),
    ],
)
def test_usage_errors(project: Path, args: list[str], says: str) -> None:
    proc = kernelscope(project, "model.py::GPT.forward", *args)
    assert proc.returncode == 2
    assert says in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("train.py:1", "train.py:1 is not a for or while statement"),
        ("train.py:9999", "train.py:9999 is past the file's end (line "),
        ("train.py:141", "a loop (PATH:LINE) runs in its program: give it with --via"),
    ],
)
def test_loop_target_errors(project: Path, target: str, says: str) -> None:
    args = ["--via", TRAIN] if not target.endswith(":141") else []
    proc = kernelscope(project, target, *args)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr


def test_a_function_the_file_does_not_define_is_named_with_those_it_does(project: Path) -> None:
    proc = kernelscope(project, "model.py::GPT.forwrd", "--via", TRAIN)
    assert proc.returncode == 2, proc.stderr
    assert "model.py defines no function GPT.forwrd; it defines " in proc.stderr
    assert "GPT.forward" in proc.stderr and "Traceback" not in proc.stderr


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def _def_line(project: Path, name: str) -> int:
    lines = (project / "model.py").read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.strip().startswith(f"def {name}("))


def test_each_replay_casts_the_weights_as_the_programs_call_did() -> None:
    """The replays run inside the program's autocast region; its cache of cast weights must
    not outlive a replay (the program's calls each opened and closed their own region): the
    weight, the bias and the input are cast in every step, not the input alone."""
    out = report(
        kernelscope(WORKLOADS, "autocast_program.py::step", "--via", "autocast_program.py",
                    "--json", "--no-lines")
    )  # fmt: skip
    assert "autocast cpu bfloat16" in out["call_site"]["modes"]
    casts = next(o["calls"] for o in out["ops"] if o["name"] == "aten::_to_copy")
    assert casts == 3 * out["steps"]["active"]


def test_on_a_remote_the_program_runs_there(tmp_path: Path, sshd) -> None:  # type: ignore[no-untyped-def]
    """Through ssh (the throwaway sshd): with a workdir holding the project the program runs
    there; without one the program's folder travels (its scripts, configs and text data:
    configurator.py, config/tiny.py, data/input.txt) and runs from a temp folder there. Both
    reports name the local files."""
    local = tmp_path / "minigpt"
    shutil.copytree(WORKLOADS / "minigpt", local, ignore=shutil.ignore_patterns("out"))
    there = tmp_path / "elsewhere" / "minigpt"
    shutil.copytree(local, there)
    ssh = f"ssh_options = {json.dumps(sshd.ssh_options)}\n"
    python = f"python = {json.dumps(sys.executable)}\n"
    (local / "pyproject.toml").write_text(
        "[project]\nname = 'minigpt'\n\n"
        f'[tool.kernelscope.remotes.box]\nkind = "ssh"\nhost = "ks-test"\n{python}{ssh}'
        f"workdir = {json.dumps(str(there))}\n\n"
        f'[tool.kernelscope.remotes.shipped]\nkind = "ssh"\nhost = "ks-test"\n{python}{ssh}'
    )
    out = report(
        kernelscope(local, "model.py::Block.forward", "--via", TRAIN, "--remote", "box",
                    "--json", "--no-lines")
    )  # fmt: skip
    assert out["runner"]["remote"] == "box"
    assert out["call_site"]["caller_path"] == str(local / "model.py")
    assert out["function"]["path"] == str(local / "model.py")
    shipped = report(
        kernelscope(local, "model.py::Block.forward", "--via", TRAIN, "--remote", "shipped",
                    "--json", "--no-lines")
    )  # fmt: skip
    assert shipped["call_site"]["caller_path"] == str(local / "model.py")
    assert shipped["call_site"]["modes"] == out["call_site"]["modes"]


def test_a_program_past_its_timeout_names_the_line_it_was_on() -> None:
    proc = kernelscope(WORKLOADS, "hang_program.py::step", "--via", "hang_program.py",
                       "--timeout", "6", "--json")  # fmt: skip
    err = error(proc)
    assert err["kind"] == "timeout"
    assert "the program's run to the call" in err["hint"] and "--timeout N" in err["hint"]
    assert (Path(err["path"]).name, err["line"]) == (
        "hang_program.py",
        _line_of(WORKLOADS / "hang_program.py", "the program hangs here"),
    )


def test_a_first_call_past_the_timeout_names_its_loop_to_profile_in_place() -> None:
    """`train` is one epoch: its first call does not return in the job's time, and the
    hint gives the command that profiles the loop it was in, in place."""
    proc = kernelscope(WORKLOADS, "epoch_program.py::train", "--via", "epoch_program.py",
                       "--timeout", "8", "--json")  # fmt: skip
    err = error(proc)
    assert err["kind"] == "timeout"
    loop = _line_of(WORKLOADS / "epoch_program.py", "for epoch_batch in range(batches):")
    at = _line_of(WORKLOADS / "epoch_program.py", "the epoch's step")
    assert err["hint"].startswith(
        f"its first call had not returned: it was in its loop at epoch_program.py:{loop} "
        f"(at line {at}); a call that long is profiled by that loop's iterations, in place: "
        f"kernelscope profile epoch_program.py:{loop} --via epoch_program.py; or the whole "
    )


def _clean_timing_run(project: Path, spec: str, command: str) -> Any:
    """A --via --save profile on a launcher that times every call again in its clean worker
    (on a GPU host-bound calls are; on the CPU only this way)."""
    import asyncio

    from kernelscope.engine.launcher import Launcher
    from kernelscope.engine.targets import Schedule, build_request, load_target, parse_entry

    target = load_target(str(project / spec))
    entry = parse_entry(command, target, project, save=True)
    request = build_request(
        target, project / ".kernelscope" / "traces", Schedule(0, 1, 2), device="cpu", entry=entry
    )

    async def go() -> Any:
        launcher = Launcher(python=sys.executable, clean_timing="always")
        try:
            return await launcher.profile(request, None, 180)
        finally:
            await launcher.close()

    return asyncio.run(go()).finished.sidecar


def test_save_and_the_clean_worker_replays_the_saved_capture(project: Path) -> None:
    """--save keeps the captured Block.forward; the clean worker's timing loads it and
    replays it, without running the program again."""
    side = _clean_timing_run(project, "model.py::Block.forward", TRAIN)
    saved = Path(side.call_site.saved)
    assert saved.parent == project / ".kernelscope" / "captures" and saved.is_file()
    assert side.timing.process == "clean worker"
    assert (side.timing.replayed_from, side.timing.replay_note) == ("saved capture", "")


def test_a_function_of_the_script_itself_runs_the_program_again(project: Path) -> None:
    side = _clean_timing_run(
        project, "train_main.py::train_step", "train_main.py --max_iters 3 --device cpu"
    )
    assert side.call_site.saved
    assert side.timing.replayed_from == "program run again"
    assert "defined in the program's script" in side.timing.replay_note


def test_a_capture_holding_the_scripts_own_classes_is_not_kept() -> None:
    """dcgan's Generator.forward: a capture of a function of the script, or one that holds
    a __main__.Net, cannot be replayed by another process; the report says it is not kept,
    and why, instead of promising a replay that would run the program again."""

    def text(spec: str) -> str:
        proc = kernelscope(WORKLOADS, spec, "--via", "script_class.py", "--no-lines",
                           "--no-memory")  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "the next profile of this call replays it" not in proc.stdout
        return proc.stdout

    assert "not kept: the function is defined in the program's script" in text(
        "script_class.py::Net.forward"
    )
    assert "not kept: it holds __main__.Net, defined in the program's script" in text(
        "script_helper.py::apply"
    )
    assert not list((WORKLOADS / ".kernelscope" / "captures").glob("apply-call1-*.pt"))


def test_an_argument_that_cannot_be_saved_is_named() -> None:
    proc = kernelscope(WORKLOADS, "unsaveable_program.py::step", "--via", "unsaveable_program.py",
                       "--save", "--json", "--no-lines")  # fmt: skip
    site = report(proc)["call_site"]
    assert site["saved"] is None
    assert site["save_error"].startswith("argument 1 (lock) cannot be saved: TypeError")


def test_a_saved_capture_is_reused_while_the_program_is_unchanged(tmp_path: Path) -> None:
    """After --save, the next profile of the same call replays the saved capture (the
    program does not run); an edited config file makes the program run again."""
    root = tmp_path / "minigpt"
    shutil.copytree(WORKLOADS / "minigpt", root, ignore=shutil.ignore_patterns("out"))
    (root / "pyproject.toml").write_text("[project]\nname = 'minigpt'\n")
    args = ("model.py::Block.forward", "--via", TRAIN, "--json", "--no-lines")
    kept = root / ".kernelscope" / "captures"
    kept.mkdir(parents=True)
    old = [kept / "Block_forward-call1.pt", kept / "Block_forward-call1.json"]
    for path in old:  # as kept before a capture's name carried its key: never read again
        path.write_text("{}")
    first = report(kernelscope(root, *args, "--save"))["call_site"]
    assert first["saved"] and first["reused"] is False
    assert not any(path.exists() for path in old)
    again = report(kernelscope(root, *args))["call_site"]
    assert again["reused"] is True and again["saved"] == first["saved"]
    assert again["modes"] == first["modes"] and again["caller_line"] == first["caller_line"]
    config = root / "config" / "tiny.py"
    config.write_text(config.read_text() + "\n# edited\n")
    rerun = report(kernelscope(root, *args))["call_site"]
    assert rerun["reused"] is False
    assert rerun["rerun_why"] == "config/tiny.py changed since the capture was kept"


def test_a_config_outside_the_programs_folder_is_part_of_the_program(tmp_path: Path) -> None:
    """`train.py ../shared/tiny.py`: a config the command line names outside the folder is
    hashed too (editing it ran the old capture again before); another command line's capture
    of the same call is kept beside it, not over it."""
    root = tmp_path / "minigpt"
    shutil.copytree(WORKLOADS / "minigpt", root, ignore=shutil.ignore_patterns("out"))
    (root / "pyproject.toml").write_text("[project]\nname = 'minigpt'\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    outside = shared / "tiny.py"
    shutil.copy(root / "config" / "tiny.py", outside)
    via = TRAIN.replace("config/tiny.py", "../shared/tiny.py")
    args = ("model.py::Block.forward", "--json", "--no-lines")
    first = report(kernelscope(root, *args, "--via", via))["call_site"]
    inside = report(kernelscope(root, *args, "--via", TRAIN))["call_site"]
    assert first["saved"] and inside["saved"] and first["saved"] != inside["saved"]
    assert report(kernelscope(root, *args, "--via", via))["call_site"]["reused"] is True
    outside.write_text(outside.read_text() + "\nbatch_size = 4\n")
    rerun = report(kernelscope(root, *args, "--via", via))["call_site"]
    assert rerun["reused"] is False
    assert rerun["rerun_why"] == "tiny.py changed since the capture was kept"
    assert report(kernelscope(root, *args, "--via", TRAIN))["call_site"]["reused"] is True


def test_a_small_capture_is_kept_without_save_and_fresh_runs_the_program(tmp_path: Path) -> None:
    """Without --save, a capture under keep_captures_mb is kept: the next profile of the
    call replays it; --fresh runs the program again; keep_captures_mb = 0 keeps nothing."""
    root = tmp_path / "minigpt"
    shutil.copytree(WORKLOADS / "minigpt", root, ignore=shutil.ignore_patterns("out"))
    (root / "pyproject.toml").write_text("[project]\nname = 'minigpt'\n")
    args = ("model.py::Block.forward", "--via", TRAIN, "--json", "--no-lines")
    first = report(kernelscope(root, *args))["call_site"]
    assert first["kept"] is True and first["saved"] and first["save_error"] is None
    again = report(kernelscope(root, *args))["call_site"]
    assert again["reused"] is True and again["saved"] == first["saved"]
    assert report(kernelscope(root, *args, "--fresh"))["call_site"]["reused"] is False
    text = kernelscope(root, *args[:-2], "--fresh", "--no-lines").stdout
    assert "the next profile of this call replays it" in text
    (root / "pyproject.toml").write_text(
        "[project]\nname = 'minigpt'\n\n[tool.kernelscope]\nkeep_captures_mb = 0\n"
    )
    shutil.rmtree(root / ".kernelscope" / "captures")
    site = report(kernelscope(root, *args))["call_site"]
    assert site["saved"] is None and site["reused"] is False
    assert report(kernelscope(root, *args))["call_site"]["reused"] is False


def test_a_capture_over_keep_captures_mb_is_not_kept(tmp_path: Path) -> None:
    root = tmp_path / "minigpt"
    shutil.copytree(WORKLOADS / "minigpt", root, ignore=shutil.ignore_patterns("out"))
    (root / "pyproject.toml").write_text(
        "[project]\nname = 'minigpt'\n\n[tool.kernelscope]\nkeep_captures_mb = 1\n"
    )
    # GPT.forward's capture holds the whole model: ~6 MB of parameters at n_embd 256
    site = report(kernelscope(root, "model.py::GPT.forward", "--via", TRAIN + " --n_embd=256",
                              "--json", "--no-lines"))["call_site"]  # fmt: skip
    assert site["saved"] is None
    assert re.fullmatch(
        r"\d+ MB of tensors, over the 1 MB kept without --save \(keep_captures_mb\)",
        site["save_error"],
    ), site["save_error"]


def _try(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return kernelscope(cwd, *args, command="try")


def test_try_on_a_programs_captured_call(tmp_path: Path) -> None:
    """`try --via`: the variants run on the captured call, replayed in its state (the
    eval pass's no_grad: the baseline and bf16 alike), and the report names the call."""
    root = tmp_path / "minigpt"
    shutil.copytree(WORKLOADS / "minigpt", root, ignore=shutil.ignore_patterns("out"))
    (root / "pyproject.toml").write_text("[project]\nname = 'minigpt'\n")
    proc = _try(root, "model.py::Block.forward", "--via", TRAIN, "--variants", "bf16,batch2",
                "--device", "cpu", "--budget", "0.5", "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["call"].startswith(f"via {TRAIN}, call 1 from model.py:")
    assert "eval mode, no_grad, captured" in out["call"]
    by_name = {v["name"]: v for v in out["variants"]}
    assert by_name["bf16"]["status"] == "ok", by_name["bf16"]
    assert by_name["bf16"]["us_per_call"] > 0 and by_name["bf16"]["results"]
    assert by_name["batch2"]["status"] == "skipped"
    assert "no input provider" in by_name["batch2"]["why"]
    text = _try(root, "model.py::Block.forward", "--via", TRAIN, "--variants", "bf16",
                "--device", "cpu", "--budget", "0.5").stdout  # fmt: skip
    assert "call      via train.py" in text and "from the saved capture" in text


def test_try_refuses_a_loop() -> None:
    loop = _line_of(WORKLOADS / "minigpt" / "train.py", "while True:")
    proc = _try(WORKLOADS / "minigpt", f"train.py:{loop}", "--via", TRAIN, "--json")
    assert proc.returncode == 2, proc.stdout[-2000:]
    assert "try replays a captured call" in json.loads(proc.stdout)["error"]["message"]


def test_memory_forecast_of_a_programs_call_resizes_its_batch(project: Path) -> None:
    """`kernelscope memory --via`: the call captured once (batch 8 in tiny.py), replayed in a
    fresh worker per size with its batch dimension resized; N checked by a run."""
    out = report(
        kernelscope(
            project,
            "model.py::MLP.forward",
            "--via",
            TRAIN,
            "--batch-sizes",
            "2,4,8",
            "--will-fit",
            "16",
            "--json",
            command="memory",
        )
    )
    assert [p["batch_size"] for p in out["points"]] == [2, 4, 8]
    peaks = [p["peak_bytes"] for p in out["points"]]
    assert peaks[2] - peaks[1] == 2 * (peaks[1] - peaks[0])  # linear in the rows
    assert any("batch 8 -> 2: dim 0 of args[1], rows cut" in n for n in out["notes"])
    assert out["asked_fits"] is True and out["check"].startswith("batch 16 ran: ")
    loop = _line_of(project / "train.py", "while True:")
    proc = kernelscope(project, f"train.py:{loop}", "--via", TRAIN, command="memory")
    assert proc.returncode == 2 and "not a loop" in proc.stderr, proc.stderr


def test_a_librarys_bare_assert_says_where_it_was_raised(tmp_path: Path) -> None:
    """timm's `assert os.path.exists(root)` (a missing --data-dir) was "AssertionError" and
    the user's line alone: the library's line that raised it is the message."""
    packages = tmp_path / "env" / "lib" / "site-packages" / "readers"
    packages.mkdir(parents=True)
    (packages / "__init__.py").write_text(
        "import os\n\n\ndef reader(root):\n    assert os.path.exists(root)\n"
    )
    (tmp_path / "prog.py").write_text(
        "import sys\nsys.path.insert(0, 'env/lib/site-packages')\nimport readers\n\n\n"
        "def step(x):\n    return x\n\n\nreaders.reader('/no/such/data')\nstep(1)\n"
    )
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    failed = error(kernelscope(tmp_path, "prog.py::step", "--via", "prog.py", "--json"))
    assert failed["message"] == (
        "prog.py failed before calling step: AssertionError at readers/__init__.py:5: "
        "assert os.path.exists(root)"
    )
    assert failed["path"].endswith("prog.py") and failed["line"] == 10


def test_in_place_steps_of_two_kinds_are_told_apart() -> None:
    """timm's train.py in place: an active call was validate()'s, under inference_mode,
    among training calls, and nothing said so."""
    args = ("train_and_validate.py::Net.forward", "--in-place", "--skip", "5", "--json",
            "--no-memory")  # fmt: skip
    site = report(kernelscope(WORKLOADS, *args, "--via", "train_and_validate.py"))["call_site"]
    (mixed,) = [m for m in site["modes"] if m.startswith("calls of different kinds: ")]
    # steps are calls 1..: the 4th, 8th, 12th... are validation calls (step % 4 == 3)
    assert (
        "4, 8, 12 under inference_mode" in mixed and "2-3, 5-7, 9-11, 13-14 with autograd" in mixed
    )
    site = report(kernelscope(WORKLOADS, *args, "--via", "train_and_validate.py --eval-only"))[
        "call_site"
    ]
    assert "no_grad" in site["modes"]
    assert not [m for m in site["modes"] if m.startswith("calls of different kinds")]


def test_in_place_from_a_line_takes_only_its_calls() -> None:
    """--from the training loop's line: in place, the steps are the calls made from there,
    the validation calls (under inference_mode) pass by uncounted."""
    source = (WORKLOADS / "train_and_validate.py").read_text().splitlines()
    line = next(n for n, text in enumerate(source, 1) if "model(x).sum().backward()" in text)
    out = report(kernelscope(WORKLOADS, "train_and_validate.py::Net.forward", "--in-place",
                             "--via", "train_and_validate.py", "--from",
                             f"train_and_validate.py:{line}", "--json", "--no-memory"))  # fmt: skip
    assert not [m for m in out["call_site"]["modes"] if "different kinds" in m]
    assert "inference_mode" not in out["call_site"]["modes"]
    assert out["steps"]["active"] == 5
    names = {op["name"] for op in out["ops"]}
    assert "autograd::engine::evaluate_function: AddmmBackward0" not in names  # forward only
    assert "aten::addmm" in names
    failed = error(kernelscope(WORKLOADS, "train_and_validate.py::Net.forward", "--in-place",
                               "--via", "train_and_validate.py", "--from",
                               "train_and_validate.py:1", "--json"))  # fmt: skip
    assert failed["kind"] == "too_few_calls" and "made 0 calls" in failed["message"]


def test_an_epoch_function_in_place_is_sent_to_its_loop() -> None:
    """timm's train_one_epoch in place: "made 2 calls ... needs 14", and the hint only said
    to run the program longer; its loop over the batches makes the steps."""
    proc = kernelscope(WORKLOADS, "epochs.py::train_one_epoch", "--via", "epochs.py",
                       "--in-place", "--json")  # fmt: skip
    failed = error(proc)
    assert failed["kind"] == "too_few_calls" and "made 2 calls" in failed["message"]
    assert failed["hint"].startswith(
        "each call runs its loop at epochs.py:8: that loop's iterations make the steps "
        "(kernelscope profile epochs.py:8 --via epochs.py); or run the program longer"
    )
    # a function that never ran (no call from that line) is not sent to its loop
    none = error(kernelscope(WORKLOADS, "epochs.py::train_one_epoch", "--via", "epochs.py",
                             "--in-place", "--from", "epochs.py:1", "--json"))  # fmt: skip
    assert "made 0 calls" in none["message"]
    assert none["hint"].startswith("run the program longer")
