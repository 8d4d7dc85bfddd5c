"""An ``accelerate launch`` command line as `--via` takes it: what starts it, and the words
accelerate's own parser is given."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from kernelscope.engine.accelerate_launch import (
    AccelerateError,
    Launch,
    is_accelerate,
    launch_args,
    resolve_launch,
)
from kernelscope.engine.targets import TargetError, job_ranks, launcher_here
from kernelscope.protocol import Entry


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("accelerate launch train.py --lr 3", ["train.py", "--lr", "3"]),
        ("/opt/venv/bin/accelerate launch --cpu t.py", ["--cpu", "t.py"]),
        ("-m accelerate.commands.launch --num_processes 2 t.py", ["--num_processes", "2", "t.py"]),
        ("-m accelerate.commands.accelerate_cli launch -m pkg.t", ["-m", "pkg.t"]),
    ],
)  # fmt: skip
def test_accelerate_launch_and_its_arguments(command: str, args: list[str]) -> None:
    words = shlex.split(command)
    assert is_accelerate(words)
    assert launch_args(words) == args


@pytest.mark.parametrize(
    "command", ["accelerate config", "accelerate", "train.py launch", "torchrun launch t.py"]
)
def test_other_commands_are_not_accelerate_launch(command: str) -> None:
    assert not is_accelerate(shlex.split(command))


def test_the_console_script_is_accelerate_launch_too() -> None:
    words = ["/venv/bin/accelerate-launch", "--cpu", "t.py"]
    assert is_accelerate(words) and launch_args(words) == ["--cpu", "t.py"]


# What the installed accelerate answers (a real subprocess of this interpreter each).


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no user's default config
    (tmp_path / "t.py").write_text("print('hi')\n")
    return tmp_path


def ask(folder: Path, command: str) -> Launch:
    return resolve_launch(shlex.split(command), folder)


def test_the_variables_accelerate_writes_are_kept_even_where_the_shell_had_them(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    launch = ask(folder, "accelerate launch --cpu --mixed_precision bf16 t.py --x 1")
    assert launch.env["ACCELERATE_MIXED_PRECISION"] == "bf16"
    assert launch.env["ACCELERATE_USE_CPU"] == "True" and "OMP_NUM_THREADS" in launch.env
    assert launch.ranks == 0 and launch.program == ["t.py", "--x", "1"]
    assert launch.shown == "accelerate launch --cpu --mixed_precision bf16"


@pytest.mark.parametrize(
    ("command", "program", "shown"),
    [
        ("accelerate launch --cpu t.py -- --steps 3", ["t.py", "--steps", "3"],
         "accelerate launch --cpu"),
        ("accelerate launch --module --cpu pkg.t --steps 3", ["-m", "pkg.t", "--steps", "3"],
         "accelerate launch --module --cpu"),
        ("accelerate launch --cpu -m pkg.t", ["-m", "pkg.t"], "accelerate launch --cpu"),
        ("-m accelerate.commands.accelerate_cli launch --cpu t.py", ["t.py"],
         "-m accelerate.commands.accelerate_cli launch --cpu"),
    ],
)  # fmt: skip
def test_the_launchers_words_as_written(
    folder: Path, command: str, program: list[str], shown: str
) -> None:
    launch = ask(folder, command)
    assert launch.program == program and launch.shown == shown


def test_a_config_file_decides_the_processes(folder: Path) -> None:
    (folder / "multi.yaml").write_text(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_machines: 1\n"
        "num_processes: 2\nmixed_precision: fp16\nmachine_rank: 0\n"
    )
    launch = ask(folder, "accelerate launch --config_file multi.yaml t.py")
    assert launch.ranks == 2 and launch.env["ACCELERATE_MIXED_PRECISION"] == "fp16"
    (folder / "multi.yaml").write_text(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: 'NO'\nnum_machines: 1\n"
        "num_processes: 1\nmixed_precision: bf16\nmachine_rank: 0\n"
    )  # the same command after the file changed: asked again, not the answer kept before
    launch = ask(folder, "accelerate launch --config_file multi.yaml t.py")
    assert launch.ranks == 0 and launch.env["ACCELERATE_MIXED_PRECISION"] == "bf16"


@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("accelerate launch --help t.py", "accelerate launch printed its help"),
        ("accelerate launch --cpu --mpirun_hostfile hosts --num_processes 2 t.py",
         "through mpirun (mpirun_hostfile hosts) is not followed"),
    ],
)  # fmt: skip
def test_what_accelerate_would_start_that_is_not_followed(
    folder: Path, command: str, says: str
) -> None:
    with pytest.raises(AccelerateError, match=re.escape(says)):
        ask(folder, command)


def test_an_interpreter_that_prints_its_own_json_does_not_confuse_the_answer(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = folder / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import atexit, sys\nsys.stdout.write('banner without a newline')\n"
        'atexit.register(lambda: print(\'{"telemetry": "sent"}\'))\n'
    )
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    launch = ask(folder, "accelerate launch --cpu t.py")
    assert launch.program == ["t.py"]


def test_a_launch_is_not_sent_to_a_remote_nor_to_other_ranks(folder: Path) -> None:
    entry = Entry(kind="script", target="t.py", launcher="accelerate launch --cpu")
    with pytest.raises(TargetError, match="followed on local runs"):
        launcher_here(entry, object())
    launcher_here(entry, None)
    with pytest.raises(TargetError, match="starts one process"):
        job_ranks(entry, 3, None)
    assert job_ranks(entry, None, 4) == 1  # the project's nproc is not this program's
